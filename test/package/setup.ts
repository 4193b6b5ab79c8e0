/**
 * Packs the package once and installs the tarball once, into a temporary
 * project that holds only the package, its peers, the packages the docs
 * import beside it, TypeScript at the oldest version the README declares,
 * and Node at the oldest version `engines` allows.
 */
import { execFileSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { TestProject } from "vitest/node"

const root = join(import.meta.dirname, "..", "..")

/** The version the repository installed, so that npm answers from its cache. */
const installed = (name: string): string =>
  JSON.parse(readFileSync(join(root, "node_modules", name, "package.json"), "utf8")).version

/** Peers first, then what the documented code blocks import beside the package. */
const besideThePackage = [
  "effect",
  "@tanstack/ai",
  "@effect/platform-node",
  "@effect/sql-pg",
  "redis",
  "@tanstack/ai-openai",
  "@tanstack/ai-anthropic",
  "@tanstack/ai-gemini",
  "@tanstack/ai-react",
  "react",
  "@effect/vitest",
  "vitest"
]

/** The floors the package declares: TypeScript in the README, Node in `engines`. */
const oldestTypeScript = "5.9.3"
const oldestNode = "22.19.0"

export default function setup(project: TestProject) {
  const dir = mkdtempSync(join(tmpdir(), "ai-effect-consumer-"))
  const npm = (args: ReadonlyArray<string>, cwd: string) => execFileSync("npm", args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] })

  const [packed] = JSON.parse(npm(["pack", "--json", "--pack-destination", dir], root)) as Array<{ readonly filename: string }>
  const tarball = join(dir, packed!.filename)

  const app = join(dir, "app")
  execFileSync("mkdir", [app])
  writeFileSync(
    join(app, "package.json"),
    JSON.stringify({
      name: "consumer",
      private: true,
      type: "module",
      dependencies: {
        "@tanstack/ai-effect": `file:${tarball}`,
        ...Object.fromEntries(besideThePackage.map((name) => [name, installed(name)]))
      },
      devDependencies: {
        "@types/node": installed("@types/node"),
        "@types/react": installed("@types/react"),
        "node": oldestNode,
        "typescript": oldestTypeScript
      },
      allowScripts: { node: true }
    }, null, 2)
  )
  npm(["install", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error"], app)

  project.provide("consumerDir", app)
  project.provide("tarball", tarball)
  return () => rmSync(dir, { recursive: true, force: true })
}
