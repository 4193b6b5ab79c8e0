/**
 * Debian's Chromium, headless, driven by playwright-core: a fresh profile per
 * launch and the flags this machine's closed network needs. Outside CI a
 * missing browser skips the browser suites loudly; under `CI=true` it fails.
 */
import { existsSync, mkdirSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type BrowserContext, chromium } from 'playwright-core'

export const chromiumPath = '/usr/bin/chromium'

export const missingBrowser = (): string | undefined => {
  if (existsSync(chromiumPath)) return undefined
  const reason = `${chromiumPath} not found (install the Debian package chromium)`
  if (process.env.CI === 'true') throw new Error(`CI needs Chromium: ${reason}`)
  console.warn(`\n*** SKIPPING the browser suites: ${reason} ***\n`)
  return reason
}

export const launchBrowser = (): Promise<BrowserContext> =>
  chromium.launchPersistentContext(mkdtempSync(join(tmpdir(), 'ai-effect-chromium-')), {
    executablePath: chromiumPath,
    headless: true,
    viewport: { width: 1280, height: 900 },
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  })

/** Where screenshots go: a git-ignored folder at the repository's root. */
export const screenshotPath = (name: string) => {
  const dir = join(import.meta.dirname, '..', '..', 'test-output')
  mkdirSync(dir, { recursive: true })
  return join(dir, `${name}.png`)
}
