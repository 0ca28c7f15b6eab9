// The package's `install` script. `npm install <folder>` links a folder that
// lies outside the installing project instead of copying it, and installs
// none of its dependencies (npm documents this); Node then resolves the
// package's imports from the folder's real path, where a fresh clone has no
// node_modules, and `import "@sessiongate/client"` fails on
// `@bufbuild/protobuf`. npm still runs the linked package's install script
// in that folder, so this script installs the runtime dependencies there,
// from package-lock.json, without devDependencies or scripts.
//
// Whenever this folder is npm's own project, or the runtime dependencies
// already resolve from the package's folder (a tarball or `--install-links` install, where npm placed them in
// the project's node_modules; a checkout after `npm ci`) it does nothing.
// It needs nothing but Node and the npm running it.

import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, realpathSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const pkgDir = realpathSync(join(dirname(fileURLToPath(import.meta.url)), ".."));
const pkg = JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8"));

/** Whether Node's lookup (node_modules in pkgDir and each parent) finds dependency name. */
function resolves(name) {
  for (let dir = pkgDir; ; dir = dirname(dir)) {
    if (existsSync(join(dir, "node_modules", name, "package.json"))) return true;
    if (dirname(dir) === dir) return false;
  }
}

// npm also runs the script when this folder is the project being installed
// (`npm ci` here): its own npm command installs what it needs.
const outerProject = process.env.npm_config_local_prefix;
if (outerProject && existsSync(outerProject) && realpathSync(outerProject) === pkgDir) process.exit(0);

const missing = Object.keys(pkg.dependencies ?? {}).filter((name) => !resolves(name));
if (missing.length === 0) process.exit(0);

// The outer npm exports its configuration as npm_config_*; the ones naming
// where and what it installs (its project's prefix, omit/include, save, …)
// would send this install into the user's project. Registry, cache, proxy,
// certificate and user/global config settings are kept.
const outerOnly = /^npm_(config_(local_prefix|prefix|global|global_prefix|omit|include|only|production|save.*|install_links|workspaces?|include_workspace_root|dry_run|package_lock.*|ignore_scripts|foreground_scripts)|package_.*|lifecycle_.*|command)$/i;
const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !outerOnly.test(k)));

// The npm running this script (npm_execpath), else the npm on PATH.
const npmCli = process.env.npm_execpath;
const [cmd, pre] = npmCli && /npm-cli\.[cm]?js$/.test(npmCli) ? [process.execPath, [npmCli]] : ["npm", []];
const args = [...pre, "install", "--omit=dev", "--ignore-scripts", "--no-save", "--no-audit", "--no-fund", "--prefix", pkgDir];
console.error(`@sessiongate/client: installing its dependencies (${missing.join(", ")}) in ${pkgDir}, which npm linked without them`);
const r = spawnSync(cmd, args, { cwd: pkgDir, env, stdio: "inherit", shell: cmd === "npm" && process.platform === "win32" });
if (r.error) {
  console.error(`@sessiongate/client: could not run npm: ${r.error.message}; run \`npm install --omit=dev\` in ${pkgDir}, or install with --install-links`);
  process.exit(1);
}
process.exit(r.status ?? 1);
