import { defineConfig } from "vitest/config"

// Tests import the package by its own name; the source condition resolves it
// to src/ so that no build is needed before a test run.
const conditions = ["@tanstack/ai-effect/source", "node", "import", "module", "default"]

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions, externalConditions: conditions } },
  test: {
    include: ["test/**/*.test.ts"],
    // The package suite has a config of its own (vitest.package.config.ts).
    exclude: ["test/package/**"],
    testTimeout: 30_000,
    hookTimeout: 60_000
  }
})
