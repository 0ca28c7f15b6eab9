// A real sessiongate gateway in a child process, for tests and tools.
//
// The binary is $SESSIONGATE_GATEWAY_BIN when set (CI builds it once), else
// it is built from the repository with `go build`. It listens on free
// loopback ports and runs its embedded reference runtime (agents echo,
// sleep, stream, fail).

import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { connect, createServer, type AddressInfo, type Server, type Socket } from "node:net";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

/** The repository root (this file compiles to clients/typescript/dist-test/test/). */
export const REPO = resolve(fileURLToPath(import.meta.url), "../../../../..");

/** The gateway binary: $SESSIONGATE_GATEWAY_BIN, else built into dir with go build. */
export function gatewayBinary(dir: string): string {
  const env = process.env.SESSIONGATE_GATEWAY_BIN;
  if (env) return env;
  const bin = join(dir, "gateway");
  execFileSync("go", ["build", "-o", bin, "./cmd/gateway"], { cwd: REPO, stdio: "inherit", timeout: 300_000 });
  return bin;
}

export class GatewayProcess {
  addr = "";
  readonly #extra: string[];
  readonly #bin?: string;

  /** extra flags are added to the gateway's command line; bin overrides the binary. */
  constructor(extra: string[] = [], bin?: string) {
    this.#extra = extra;
    this.#bin = bin;
  }

  admin = "";
  readonly log: string[] = [];
  #proc?: ChildProcess;
  #exited?: Promise<void>;
  #tmp = mkdtempSync(join(tmpdir(), "sessiongate-ts-"));

  /** Starts the gateway and resolves with its addresses, within timeoutMs. */
  async start(timeoutMs = 30_000): Promise<this> {
    const bin = this.#bin ?? gatewayBinary(this.#tmp);
    const proc = spawn(bin, ["--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--log-format", "json", ...this.#extra], {
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

  /** Sends the gateway a signal (SIGSTOP, SIGCONT: a frozen replica). */
  signal(sig: NodeJS.Signals): void {
    this.#proc?.kill(sig);
  }

  /** SIGKILLs the gateway (a replica's sudden death) and waits for it. */
  async kill(): Promise<void> {
    const proc = this.#proc;
    if (proc && proc.exitCode === null && proc.signalCode === null) {
      proc.kill("SIGKILL");
      await this.#exited;
    }
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

/**
 * A cluster of real processes: redis-server (unix socket, no persistence),
 * the reference runtime (`gateway runtime`) and three replicas sharing them,
 * with a 1 s lease so that a killed owner's sessions are taken over quickly.
 * Needs redis-server on PATH (available()).
 */
export class ClusterProcess {
  readonly replicas: GatewayProcess[] = [];
  #tmp = mkdtempSync(join(tmpdir(), "sgts-cl-"));
  #procs: ChildProcess[] = [];
  #args: string[][] = [];
  #bin = "";

  static available(): boolean {
    try {
      execFileSync("sh", ["-c", "command -v redis-server"], { stdio: "ignore" });
      return true;
    } catch {
      return false;
    }
  }

  async start(timeoutMs = 60_000): Promise<this> {
    try {
      await this.#start(Date.now() + timeoutMs);
    } catch (err) {
      await this.stop();
      throw err;
    }
    return this;
  }

  async #start(deadline: number): Promise<void> {
    const sock = join(this.#tmp, "r.sock");
    const redis = spawn("redis-server", ["--port", "0", "--unixsocket", sock, "--unixsocketperm", "700", "--save", "", "--appendonly", "no", "--dir", this.#tmp], { stdio: "ignore" });
    this.#procs.push(redis);
    while (!(await redisPong(sock))) {
      if (Date.now() > deadline || redis.exitCode !== null) throw new Error("redis-server did not start");
      await new Promise((res) => setTimeout(res, 5));
    }
    const bin = gatewayBinary(this.#tmp);
    const rt = spawn(bin, ["runtime", "--listen", "127.0.0.1:0", "--log-format", "json"], { stdio: ["ignore", "ignore", "pipe"] });
    this.#procs.push(rt);
    const url = await new Promise<string>((res, rej) => {
      const timer = setTimeout(() => rej(new Error("the runtime did not start")), Math.max(1, deadline - Date.now()));
      createInterface({ input: rt.stderr! }).on("line", (line) => {
        try {
          const rec = JSON.parse(line);
          if (rec.msg === "reference runtime serving") {
            clearTimeout(timer);
            res(rec.url as string);
          }
        } catch {
          // not JSON
        }
      });
    });
    const key = "k1:" + randomBytes(32).toString("base64");
    this.#bin = bin;
    for (let i = 0; i < 3; i++) {
      this.#args.push(["--instance-id", `gw-${i + 1}`, "--runtime", `default=${url}`, "--redis", `unix://${sock}`,
        "--directory-key", key, "--cluster-secret", "ts-cluster-secret-0123456789", "--lease-ttl", "1s"]);
      const gw = new GatewayProcess(this.#args[i], bin);
      this.replicas.push(gw);
      await gw.start(Math.max(1000, deadline - Date.now()));
    }
  }

  /**
   * SIGTERMs replica i, waits for it to exit (its lame-duck drain), and starts
   * it again on the same gRPC address (a rolling restart's step).
   */
  async restart(i: number, timeoutMs = 60_000): Promise<void> {
    const old = this.replicas[i];
    await old.stop();
    const gw = new GatewayProcess([...this.#args[i], "--listen", old.addr], this.#bin);
    this.replicas[i] = gw;
    await gw.start(timeoutMs);
  }

  async stop(): Promise<void> {
    for (const gw of this.replicas) {
      await gw.kill();
      await gw.stop();
    }
    for (const p of this.#procs) {
      if (p.exitCode === null && p.signalCode === null) {
        const exited = new Promise((res) => p.once("exit", res));
        p.kill("SIGKILL");
        await exited;
      }
    }
    rmSync(this.#tmp, { recursive: true, force: true });
  }
}

function redisPong(sock: string): Promise<boolean> {
  return new Promise((res) => {
    const c = connect(sock);
    c.setTimeout(1000);
    c.once("connect", () => c.write("*1\r\n$4\r\nPING\r\n"));
    c.once("data", (b) => {
      c.destroy();
      res(b.toString().startsWith("+PONG"));
    });
    c.once("error", () => res(false));
    c.once("timeout", () => {
      c.destroy();
      res(false);
    });
  });
}
