// A real sessiongate gateway in a child process, for tests and tools.
//
// The binary is $SESSIONGATE_GATEWAY_BIN when set (CI builds it once), else
// it is built from the repository with `go build`. It listens on free
// loopback ports and runs its embedded reference runtime (agents echo,
// sleep, stream, fail).

import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { connect, createServer, type AddressInfo, type Server, type Socket } from "node:net";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

/** The repository root (this file compiles to clients/typescript/dist-test/test/). */
export const REPO = resolve(fileURLToPath(import.meta.url), "../../../../..");

export class GatewayProcess {
  addr = "";
  admin = "";
  readonly log: string[] = [];
  #proc?: ChildProcess;
  #exited?: Promise<void>;
  #tmp = mkdtempSync(join(tmpdir(), "sessiongate-ts-"));

  /** Starts the gateway and resolves with its addresses, within timeoutMs. */
  async start(timeoutMs = 30_000): Promise<this> {
    let bin = process.env.SESSIONGATE_GATEWAY_BIN;
    if (!bin) {
      bin = join(this.#tmp, "gateway");
      execFileSync("go", ["build", "-o", bin, "./cmd/gateway"], { cwd: REPO, stdio: "inherit", timeout: 300_000 });
    }
    const proc = spawn(bin, ["--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--log-format", "json"], {
      stdio: ["ignore", "ignore", "pipe"],
    });
    this.#proc = proc;
    this.#exited = new Promise((res) => proc.once("exit", () => res()));
    const ready = new Promise<void>((res, rej) => {
      const timer = setTimeout(() => rej(new Error(`gateway did not report its address:\n${this.log.join("\n")}`)), timeoutMs);
      createInterface({ input: proc.stderr! }).on("line", (line) => {
        this.log.push(line);
        if (this.addr) return;
        try {
          const rec = JSON.parse(line);
          if (rec.msg === "sessiongate serving") {
            this.addr = rec.grpc;
            this.admin = rec.admin;
            clearTimeout(timer);
            res();
          }
        } catch {
          // not JSON: ignore
        }
      });
      proc.once("exit", (code) => {
        clearTimeout(timer);
        rej(new Error(`gateway exited (${code}) early:\n${this.log.join("\n")}`));
      });
    });
    try {
      await ready;
    } catch (err) {
      await this.stop();
      throw err;
    }
    return this;
  }

  /** Stops the gateway (SIGTERM, then SIGKILL after 30 s) and waits for it. Idempotent. */
  async stop(): Promise<void> {
    const proc = this.#proc;
    if (proc && proc.exitCode === null && proc.signalCode === null) {
      proc.kill("SIGTERM");
      const timer = setTimeout(() => proc.kill("SIGKILL"), 30_000);
      await this.#exited;
      clearTimeout(timer);
    }
    rmSync(this.#tmp, { recursive: true, force: true });
  }
}

/**
 * A TCP proxy on a free loopback port in front of target ("host:port"),
 * whose cut() drops every connection it carries (as a replica's death or a
 * network fault would) while it goes on accepting new ones.
 */
export class CutProxy {
  addr = "";
  /** Connections accepted so far. */
  connections = 0;
  readonly #target: { host: string; port: number };
  readonly #server: Server;
  readonly #socks = new Set<Socket>();

  constructor(target: string) {
    const i = target.lastIndexOf(":");
    this.#target = { host: target.slice(0, i), port: Number(target.slice(i + 1)) };
    this.#server = createServer((client) => {
      this.connections++;
      const upstream = connect(this.#target);
      for (const s of [client, upstream]) {
        this.#socks.add(s);
        s.on("error", () => {});
        s.on("close", () => {
          this.#socks.delete(s);
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream);
      upstream.pipe(client);
    });
  }

  async start(): Promise<this> {
    await new Promise<void>((res) => this.#server.listen(0, "127.0.0.1", res));
    this.addr = `127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
    return this;
  }

  /** Drops every connection now, with a reset. */
  cut(): void {
    for (const s of this.#socks) s.resetAndDestroy();
    this.#socks.clear();
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((res) => this.#server.close(() => res()));
  }
}
