import { defineConfig } from "vitest/config"

// Tests import the package by its own name; the source condition resolves it
// to src/ so that no build is needed before a test run.
const conditions = ["@tanstack/ai-effect/source", "node", "import", "module", "default"]

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions, externalConditions: conditions } },
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    projects: [
      // The fast loop (npm run test:unit): one process, loopback fakes only.
      { extends: true, test: { name: "unit", include: ["test/*.test.ts"] } },
      // Suites that start processes, database servers or a browser.
      { extends: true, test: { name: "e2e", include: ["test/e2e/**/*.test.ts"] } }
    ]
    // The package suite has a config of its own (vitest.package.config.ts).
  }
})
