/**
 * Effect Chat, started exactly as `npm start` starts it (a child process,
 * on a free port of 127.0.0.1, with no OPENAI_API_KEY), checked with a plain
 * HTTP client and driven in a real browser.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { BrowserContext, Page } from 'playwright-core'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { startFakeAnthropic, startFakeGemini } from '@tanstack/ai-effect/testing'
import { ensureBuilt } from '../../examples/chat-app/build.ts'
import { chatRequestBody } from '../support/agui.ts'
import { launchBrowser, missingBrowser, screenshotPath } from '../support/browser.ts'
import { freePort } from '../support/services.ts'

interface RunningApp {
  readonly url: string
  /** Everything the server printed so far. */
  readonly output: () => string
  readonly stop: () => Promise<void>
}

const root = join(import.meta.dirname, '..', '..')

/** Starts the app as `npm start` does: node with the source condition, running examples/chat-app/main.ts. */
const startApp = async (options: {
  readonly port: number
  readonly effectsDb: string
  readonly env?: Readonly<Record<string, string>>
}): Promise<RunningApp> => {
  const { OPENAI_API_KEY: _openai, ANTHROPIC_API_KEY: _anthropic, GEMINI_API_KEY: _gemini, ...env } = process.env
  const child: ChildProcess = spawn(process.execPath, ['--conditions=@tanstack/ai-effect/source', 'examples/chat-app/main.ts'], {
    cwd: root,
    env: { ...env, ...options.env, PORT: String(options.port), HOST: '127.0.0.1', EFFECTS_DB: options.effectsDb },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  child.stdout!.on('data', (part: Buffer) => (output += part.toString()))
  child.stderr!.on('data', (part: Buffer) => (output += part.toString()))
  const deadline = Date.now() + 30_000
  while (!output.includes('Effect Chat is listening on')) {
    if (child.exitCode !== null) throw new Error(`the app exited early:\n${output}`)
    if (Date.now() > deadline) throw new Error(`the app did not start:\n${output}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  return {
    url: `http://127.0.0.1:${options.port}`,
    output: () => output,
    stop: async () => {
      if (child.exitCode !== null) return
      const exited = once(child, 'exit')
      child.kill('SIGTERM')
      await exited
    },
  }
}

const running: Array<RunningApp> = []
afterEach(async () => {
  for (const app of running.splice(0)) await app.stop()
})

beforeAll(async () => {
  // Build once before the timed starts, so that no test waits for Vite.
  await ensureBuilt()
}, 120_000)

const freshApp = async (env: Readonly<Record<string, string>> = {}) => {
  const options = { port: await freePort(), effectsDb: join(mkdtempSync(join(tmpdir(), 'ai-effect-chat-')), 'effects.db'), env }
  const app = await startApp(options)
  running.push(app)
  return { app, options }
}

describe('Effect Chat over plain HTTP', () => {
  it('started as npm start starts it, serves the page and answers the chat route as server-sent events', async () => {
    const { app } = await freshApp()
    const page = await fetch(app.url)
    expect(page.status).toBe(200)
    expect(await page.text()).toContain('<div id="root"></div>')
    const info = await (await fetch(`${app.url}/api/info`)).json()
    expect(info).toEqual({ model: 'offline demo model', offline: true })

    const response = await fetch(`${app.url}/api/chat`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: chatRequestBody({ threadId: 'thread-http', runId: 'run-http' }, 'Where is order A-100?'),
    })
    expect(response.headers.get('content-type')).toContain('text/event-stream')
    const events = (await response.text()).split('\n').filter((line) => line.startsWith('data: ')).map((line) => JSON.parse(line.slice(6)))
    expect(events.find((event) => event.type === 'TOOL_CALL_RESULT')).toMatchObject({ content: JSON.stringify({ status: 'shipped' }) })
    const text = events.filter((event) => event.type === 'TEXT_MESSAGE_CONTENT').map((event) => event.delta).join('')
    expect(text).toBe('Order A-100 is shipped.')
  }, 60_000)

  const providers = [
    { key: 'ANTHROPIC', start: startFakeAnthropic, model: 'claude-sonnet-4-5' },
    { key: 'GEMINI', start: startFakeGemini, model: 'gemini-2.5-flash' },
  ] as const
  for (const { key, start, model } of providers) {
    it(`${key}_API_KEY with ${key}_BASE_URL runs the app on that provider: its tool call, the tool's result and its answer reach the client`, async () => {
      const provider = await start([
        { toolCalls: [{ name: 'get_order', args: { id: 'A-100' }, id: 'call_1' }] },
        { text: 'Order A-100 is shipped.' },
      ])
      try {
        const { app } = await freshApp({ [`${key}_API_KEY`]: 'test-key', [`${key}_BASE_URL`]: provider.baseURL })
        expect(await (await fetch(`${app.url}/api/info`)).json()).toEqual({ model, offline: false })
        const response = await fetch(`${app.url}/api/chat`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: chatRequestBody({ threadId: `thread-${key}`, runId: `run-${key}` }, 'Where is order A-100?'),
        })
        const events = (await response.text()).split('\n').filter((line) => line.startsWith('data: ')).map((line) => JSON.parse(line.slice(6)))
        expect(events.find((event) => event.type === 'TOOL_CALL_RESULT')).toMatchObject({ content: JSON.stringify({ status: 'shipped' }) })
        expect(provider.toolResults(1)).toEqual([{ callId: 'call_1', output: JSON.stringify({ status: 'shipped' }) }])
        const text = events.filter((event) => event.type === 'TEXT_MESSAGE_CONTENT').map((event) => event.delta).join('')
        expect(text).toBe('Order A-100 is shipped.')
      } finally {
        await provider.close()
      }
    }, 60_000)
  }
})

const noBrowser = missingBrowser()

describe.skipIf(noBrowser !== undefined)('Effect Chat in a browser', () => {
  let browser: BrowserContext
  beforeAll(async () => {
    browser = await launchBrowser()
  }, 60_000)
  afterAll(async () => {
    await browser?.close()
  })

  const open = async (url: string) => {
    const page = await browser.newPage()
    await page.goto(url)
    await page.getByTestId('model').waitFor()
    return page
  }

  /** Sends a question and waits until the run has ended (the Send button is back). */
  const ask = async (page: Page, question: string) => {
    await page.getByTestId('input').fill(question)
    await page.getByTestId('send').click()
    await page.getByTestId('stop').waitFor({ state: 'detached', timeout: 20_000 }).catch(() => undefined)
    await page.getByTestId('send').waitFor({ timeout: 20_000 })
  }

  const lastAnswer = (page: Page) => page.getByTestId('assistant-text').last()

  it('A-100: the answer streams in after the get_order call and its result; B-200: the tool error and a reply', async () => {
    const { app } = await freshApp()
    const page = await open(app.url)
    await expect.poll(() => page.getByTestId('model').innerText()).toContain('Offline demo model')

    await ask(page, 'Where is order A-100?')
    const call = page.getByTestId('tool-call').last()
    expect(await call.getAttribute('data-tool')).toBe('get_order')
    expect(await call.innerText()).toContain('{"id":"A-100"}')
    expect(await call.getByTestId('tool-result').innerText()).toBe('{"status":"shipped"}')
    await expect.poll(() => lastAnswer(page).innerText()).toBe('Order A-100 is shipped.')

    await ask(page, 'Where is order B-200?')
    expect(await page.getByTestId('tool-call').last().getByTestId('tool-error').innerText()).toBe('OrderNotFound: {"id":"B-200"}')
    await expect.poll(() => lastAnswer(page).innerText()).toContain('That did not work: OrderNotFound')
    await page.screenshot({ path: screenshotPath('orders'), fullPage: true })
  }, 60_000)

  it('the effect tool called twice in one run is applied once: one outbox row, and the second call shows as recorded', async () => {
    const { app } = await freshApp()
    const page = await open(app.url)
    await ask(page, 'Notify me twice about A-100')
    const calls = page.locator('[data-tool="notify"]')
    await expect.poll(() => calls.count()).toBe(2)
    await expect.poll(() => calls.getByTestId('outcome').allInnerTexts()).toEqual(['applied', 'recorded'])
    await expect.poll(() => page.getByTestId('outbox').locator('li').count()).toBe(1)
    await page.screenshot({ path: screenshotPath('effect-applied-once'), fullPage: true })
  }, 60_000)

  it('Stop during a slow tool ends the run, and the server logs that the tool fiber was interrupted', async () => {
    const { app } = await freshApp()
    const page = await open(app.url)
    await page.getByTestId('input').fill('Track A-100')
    await page.getByTestId('send').click()
    // The tool has reported its first leg: it is running.
    await page.getByTestId('progress').waitFor({ timeout: 20_000 })
    await page.getByTestId('stop').click()
    await page.getByTestId('send').waitFor({ timeout: 10_000 })
    await expect.poll(() => app.output(), { timeout: 10_000 }).toContain('track_shipment for A-100 was interrupted; its finalizer ran')
    expect(await page.getByTestId('tool-call').last().getByTestId('tool-result').count()).toBe(0)
    expect(await page.getByTestId('tool-call').last().getByTestId('stopped').innerText()).toBe('stopped before it finished')
    await page.screenshot({ path: screenshotPath('stopped'), fullPage: true })
  }, 60_000)

  it('after a restart, a repeated effect is replayed from the SQLite file, not applied again', async () => {
    const { app, options } = await freshApp()
    const page = await open(app.url)
    await ask(page, 'Notify me about A-100')
    await expect.poll(() => page.getByTestId('outcome').last().innerText()).toBe('applied')

    await app.stop()
    const restarted = await startApp(options)
    running.push(restarted)
    // The same page, the same conversation: the server is new, the store is not.
    await ask(page, 'Notify me about A-100')
    await expect.poll(() => page.getByTestId('outcome').last().innerText()).toBe('recorded')
    await page.getByRole('button', { name: 'Refresh' }).click()
    await expect.poll(() => page.getByTestId('outbox').locator('li').count()).toBe(1)
    await page.screenshot({ path: screenshotPath('replayed-after-restart'), fullPage: true })
  }, 60_000)
})
