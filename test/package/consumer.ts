/**
 * The consumer project of the package suite: where the setup installed the
 * packed tarball with its peers, and how a test runs a command there.
 */
import { execFile } from "node:child_process"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { inject } from "vitest"

declare module "vitest" {
  export interface ProvidedContext {
    readonly consumerDir: string
    readonly tarball: string
  }
}

export const repositoryRoot = join(import.meta.dirname, "..", "..")

/** The folder of the consumer project and the tarball it installed. */
export const consumer = () => ({ dir: inject("consumerDir"), tarball: inject("tarball") })

/** The installed package's own folder. */
export const installedPackage = () => join(consumer().dir, "node_modules", "@tanstack", "ai-effect")

export const installedManifest = (): {
  readonly engines: { readonly node: string }
  readonly exports: Record<string, unknown>
  readonly [key: string]: unknown
} => JSON.parse(readFileSync(join(installedPackage(), "package.json"), "utf8"))

/** The two Node versions a user may run: the oldest the package supports, and the current one. */
export const nodes = () => ({
  oldest: join(consumer().dir, "node_modules", "node", "bin", "node"),
  current: join(repositoryRoot, "node_modules", "node", "bin", "node")
})

export interface Ran {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

/** Runs a command in the consumer project and resolves with how it ended. */
export const run = (file: string, args: ReadonlyArray<string>, cwd = consumer().dir): Promise<Ran> =>
  new Promise((resolve) => {
    execFile(file, args, { cwd, maxBuffer: 64 * 1024 * 1024, env: { ...process.env, NODE_OPTIONS: "" } }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : 1, stdout, stderr })
    })
  })
