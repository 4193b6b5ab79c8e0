import { execFileSync } from "node:child_process"
import { describe, expect, it } from "vitest"
import { installedManifest, installedPackage, nodes, run } from "./consumer.ts"

const subpaths = () =>
  Object.keys(installedManifest().exports)
    .filter((subpath) => subpath !== "./package.json")
    .map((subpath) => subpath.replace(/^\./, "@tanstack/ai-effect"))

// Imports a subpath the way a user's program does and prints where it
// resolved and what it exports.
const probe = (specifier: string) =>
  `const url = import.meta.resolve(${JSON.stringify(specifier)});` +
  `const module = await import(${JSON.stringify(specifier)});` +
  `console.log(JSON.stringify({ url, exports: Object.keys(module).length }))`

describe("every subpath of the installed package", () => {
  it("the oldest Node is the one engines allows", () => {
    const floor = installedManifest().engines.node.replace(/^>=/, "")
    expect(execFileSync(nodes().oldest, ["--version"], { encoding: "utf8" }).trim()).toBe(`v${floor}.0`)
  })

  for (const [label, node] of [["the oldest supported Node", "oldest"], ["Node 24", "current"]] as const) {
    it(`loads with plain node on ${label}, from dist/`, async () => {
      for (const specifier of subpaths()) {
        const loaded = await run(nodes()[node], ["--input-type=module", "--eval", probe(specifier)])
        expect(loaded.code, loaded.stderr).toBe(0)
        // Not even Node 22's warning that node:sqlite is experimental: /sqlite loads it when its layer is built.
        expect(loaded.stderr, specifier).toBe("")
        const { url, exports } = JSON.parse(loaded.stdout) as { readonly url: string; readonly exports: number }
        expect(url.startsWith(`file://${installedPackage()}/dist/`), `${specifier} resolved to ${url}`).toBe(true)
        expect(exports, specifier).toBeGreaterThan(0)
      }
    })
  }
})
