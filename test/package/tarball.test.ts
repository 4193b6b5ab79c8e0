import { execFileSync } from "node:child_process"
import { describe, expect, it } from "vitest"
import { consumer, installedManifest, repositoryRoot, run } from "./consumer.ts"

const bin = (name: string) => `${repositoryRoot}/node_modules/.bin/${name}`

describe("the packed tarball", () => {
  it("ships a declaration beside every module, with the license and the readme", () => {
    const files = execFileSync("tar", ["-tzf", consumer().tarball], { encoding: "utf8" })
      .split("\n").filter((line) => line !== "").map((line) => line.replace(/^package\//, ""))
    const modules = files.filter((file) => file.startsWith("dist/") && file.endsWith(".js"))
    expect(modules).toContain("dist/index.js")
    expect(modules.filter((file) => !files.includes(file.replace(/\.js$/, ".d.ts")))).toEqual([])
    expect(files).toEqual(expect.arrayContaining(["LICENSE", "README.md", "package.json"]))
  })

  it("says where the package comes from and exports its package.json", () => {
    const manifest = installedManifest()
    expect(manifest).toMatchObject({
      repository: { type: "git", url: expect.stringContaining("ai-effect") },
      homepage: expect.any(String),
      bugs: { url: expect.any(String) },
      keywords: expect.arrayContaining(["tanstack", "effect"])
    })
    expect(manifest.exports["./package.json"]).toBe("./package.json")
  })

  it("has no script that an install runs, so npm's allowScripts has nothing to warn about (dist/ is built by prepack)", () => {
    const scripts = Object.keys((installedManifest().scripts ?? {}) as Record<string, string>)
    expect(scripts.filter((name) => ["preinstall", "install", "postinstall", "prepare"].includes(name))).toEqual([])
    expect(scripts).toContain("prepack")
  })

  it("has nothing publint would report", async () => {
    const linted = await run(bin("publint"), ["run", consumer().tarball, "--strict", "--level", "suggestion"])
    expect(linted.stdout + linted.stderr).toContain("All good!")
    expect(linted.code).toBe(0)
  })

  it("has types that resolve for node16-ESM and bundlers (attw, esm-only profile of .attw.json)", async () => {
    const checked = await run(bin("attw"), [consumer().tarball, "--format", "json"], repositoryRoot)
    const analysis = JSON.parse(checked.stdout) as { readonly analysis: { readonly problems: ReadonlyArray<{ readonly kind: string; readonly resolutionKind?: string }> } }
    const esmProblems = analysis.analysis.problems.filter((problem) =>
      problem.resolutionKind === undefined || problem.resolutionKind === "node16-esm" || problem.resolutionKind === "bundler"
    )
    expect(esmProblems).toEqual([])
    expect(checked.code).toBe(0)
  })
})
