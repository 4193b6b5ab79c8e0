/**
 * Builds the page with Vite when it is missing or older than its sources, so
 * that `npm start` is one command on a fresh clone and seconds afterwards.
 */
import { existsSync, readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'

export const webSource = join(import.meta.dirname, 'web')
export const webRoot = join(import.meta.dirname, 'dist')

const newestSource = (dir: string): number =>
  Math.max(...readdirSync(dir, { withFileTypes: true }).map((entry) =>
    entry.isDirectory() ? newestSource(join(dir, entry.name)) : statSync(join(dir, entry.name)).mtimeMs,
  ))

export async function ensureBuilt(): Promise<void> {
  const index = join(webRoot, 'index.html')
  if (existsSync(index) && statSync(index).mtimeMs >= newestSource(webSource)) return
  const { build } = await import('vite')
  await build({ configFile: join(import.meta.dirname, 'vite.config.ts'), logLevel: 'warn' })
}
