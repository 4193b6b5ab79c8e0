/**
 * Effect Chat, started exactly as `npm start` starts it (a child process,
 * on a free port of 127.0.0.1, with no OPENAI_API_KEY), checked with a plain
 * HTTP client and driven in a real browser: its answers, its effects, and a
 * conversation that survives a reload, a second tab and a dropped
 * connection.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync } from 'node:fs'
import { connect, createServer, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { BrowserContext, Page } from 'playwright-core'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { startFakeAnthropic, startFakeGemini, startFakeOpenAI } from '@tanstack/ai-effect/testing'
import { ensureBuilt } from '../../examples/chat-app/build.ts'
import { chatRequestBody } from '../support/agui.ts'
import { launchBrowser, missingBrowser, screenshotPath } from '../support/browser.ts'
import { freePort } from '../support/services.ts'

interface RunningApp {
  readonly url: string
  /** Everything the server printed so far. */
  readonly output: () => string
  readonly stop: () => Promise<void>
  /** SIGKILLs the server, as a crash or an OOM kill does. */
  readonly kill: () => Promise<void>
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
  const signal = async (name: NodeJS.Signals) => {
    if (child.exitCode !== null || child.signalCode !== null) return
    const exited = once(child, 'exit')
    child.kill(name)
    await exited
  }
  return {
    url: `http://127.0.0.1:${options.port}`,
    output: () => output,
    stop: () => signal('SIGTERM'),
    kill: () => signal('SIGKILL'),
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

/** A slow answer of `count` words, one delta every 50 ms: long enough to reload or drop the connection mid-answer. */
/** The app's outbox: every message its effect tools sent, as `/api/effects` lists it. */
const outboxOf = async (url: string) =>
  (await (await fetch(`${url}/api/effects`)).json()) as { readonly messages: ReadonlyArray<{ readonly text: string }> }

const slowAnswer = (count: number) => Array.from({ length: count }, (_, index) => `word${index} `)

/**
 * A TCP proxy in front of the app, as a flaky network between the page and
 * the server: the first connection that carries a chat answer is destroyed
 * once `afterIds` of its events went through, and a request that resumes
 * (Last-Event-ID) waits `stallMs` before it reaches the server, so that the
 * page shows that it is reconnecting. It records the id the page resumed
 * from.
 */
const flakyProxy = async (targetPort: number, options: { readonly afterIds: number; readonly stallMs: number }) => {
  let dropped = false
  let resumedWith: string | undefined
  const sockets = new Set<Socket>()
  const server = createServer((client) => {
    const upstream = connect(targetPort, '127.0.0.1')
    sockets.add(client).add(upstream)
    // The request's bytes go upstream in order; once it resumes, after a wait, as on a network still coming back.
    let forwarded = Promise.resolve()
    client.on('data', (data: Buffer) => {
      const resuming = data.toString('latin1').match(/^last-event-id: (.*)\r$/im)?.[1]
      resumedWith ??= resuming
      if (resuming !== undefined) forwarded = forwarded.then(() => new Promise((resolve) => setTimeout(resolve, options.stallMs)))
      forwarded = forwarded.then(() => void upstream.write(data))
    })
    let seen = ''
    upstream.on('data', (data: Buffer) => {
      client.write(data)
      if (dropped) return
      seen += data.toString('latin1')
      if (seen.includes('text/event-stream') && (seen.match(/^id: /gm)?.length ?? 0) >= options.afterIds) {
        dropped = true
        client.destroy()
        upstream.destroy()
      }
    })
    for (const socket of [client, upstream]) socket.on('error', () => socket.destroy())
    upstream.on('close', () => client.destroy())
    client.on('close', () => upstream.destroy())
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  return {
    url: `http://127.0.0.1:${port}`,
    dropped: () => dropped,
    resumedWith: () => resumedWith,
    close: () => {
      for (const socket of sockets) socket.destroy()
      return new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

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

  /** The app on a fake OpenAI that streams `answer` slowly, and the fake (to count what it was asked). */
  const appOnSlowModel = async (answer: ReadonlyArray<string>) => {
    const model = await startFakeOpenAI([{ text: answer, deltaDelayMs: 50 }])
    const { app, options } = await freshApp({ OPENAI_API_KEY: 'test-key', OPENAI_BASE_URL: model.baseURL })
    return { app, options, model }
  }

  const assistantTexts = (page: Page) => page.getByTestId('assistant-text').allInnerTexts()

  it('a reload mid-answer rejoins it from the server: the answer ends whole, no text missing or repeated, and the model was asked once', async () => {
    const answer = slowAnswer(40)
    const { app, model } = await appOnSlowModel(answer)
    try {
      const page = await open(app.url)
      await page.getByTestId('input').fill('Tell me a long story')
      await page.getByTestId('send').click()
      await expect.poll(() => lastAnswer(page).innerText().catch(() => ''), { timeout: 10_000 }).toContain('word5')
      await page.reload()
      await page.getByTestId('model').waitFor()
      await expect.poll(() => assistantTexts(page), { timeout: 20_000 }).toEqual([answer.join('').trim()])
      expect(await page.getByTestId('user-text').allInnerTexts()).toEqual(['Tell me a long story'])
      expect(model.requests).toHaveLength(1)
      await page.getByTestId('send').waitFor()
      await page.screenshot({ path: screenshotPath('rejoined-after-reload'), fullPage: true })
    } finally {
      await model.close()
    }
  }, 60_000)

  it('a second tab on the thread hydrates the transcript: the question, the tool call with its result, and the answer', async () => {
    const { app } = await freshApp()
    const page = await open(app.url)
    await ask(page, 'Where is order A-100?')
    await expect.poll(() => lastAnswer(page).innerText()).toBe('Order A-100 is shipped.')
    expect(new URL(page.url()).searchParams.get('thread')).toMatch(/^thread-/)

    const second = await open(page.url())
    await expect.poll(() => assistantTexts(second)).toEqual(['Order A-100 is shipped.'])
    expect(await second.getByTestId('user-text').allInnerTexts()).toEqual(['Where is order A-100?'])
    expect(await second.getByTestId('tool-call').getByTestId('tool-result').innerText()).toBe('{"status":"shipped"}')
    // A new conversation is a new thread: nothing of this one shows there.
    await second.getByTestId('new-thread').click()
    await second.getByTestId('model').waitFor()
    expect(new URL(second.url()).searchParams.get('thread')).not.toBe(new URL(page.url()).searchParams.get('thread'))
    expect(await second.getByTestId('user-text').count()).toBe(0)
  }, 60_000)

  it('a connection destroyed mid-answer resumes from the last event id: the page shows it reconnects, and every word arrives once, in order', async () => {
    const answer = slowAnswer(30)
    const { app, model } = await appOnSlowModel(answer)
    const proxy = await flakyProxy(Number(new URL(app.url).port), { afterIds: 8, stallMs: 1_500 })
    try {
      const page = await open(proxy.url)
      await page.getByTestId('input').fill('Tell me a story')
      await page.getByTestId('send').click()
      await page.getByTestId('reconnecting').waitFor({ timeout: 10_000 })
      expect(proxy.dropped()).toBe(true)
      await expect.poll(() => assistantTexts(page), { timeout: 20_000 }).toEqual([answer.join('').trim()])
      expect(proxy.resumedWith()).toMatch(/^ai-effect:v1:/)
      expect(await page.getByTestId('reconnecting').count()).toBe(0)
      expect(model.requests).toHaveLength(1)
    } finally {
      await proxy.close()
      await model.close()
    }
  }, 60_000)

  it('the server is SIGKILLed mid-answer and started again: the page rejoins, the answer shows once, the finished model turn is not asked again, and the effect applied once', async () => {
    const answer = slowAnswer(40)
    // Turn 1 notifies (an effect tool); turn 2 answers slowly.
    const model = await startFakeOpenAI((request) =>
      request.input.some((item) => item.type === 'function_call_output')
        ? { text: answer, deltaDelayMs: 50 }
        : { toolCalls: [{ name: 'notify', args: { to: 'you@example.com', text: 'Your order shipped' } }] },
    )
    try {
      const { app, options } = await freshApp({ OPENAI_API_KEY: 'test-key', OPENAI_BASE_URL: model.baseURL })
      const page = await open(app.url)
      await page.getByTestId('input').fill('Notify me, then tell me a story')
      await page.getByTestId('send').click()
      await expect.poll(() => lastAnswer(page).innerText().catch(() => ''), { timeout: 10_000 }).toContain('word5')
      await app.kill()
      const restarted = await startApp(options)
      running.push(restarted)
      // The same page, never reloaded: it reconnects to the restarted server and the answer goes on.
      await expect.poll(() => assistantTexts(page), { timeout: 30_000 }).toEqual([answer.join('').trim()])
      await page.getByTestId('send').waitFor()
      const turns = model.requests.map((request) => (request.input.some((item) => item.type === 'function_call_output') ? 'answer' : 'notify'))
      // The notify turn finished before the crash: asked once. The answer was in flight: asked once more.
      expect(turns).toEqual(['notify', 'answer', 'answer'])
      const effects = await outboxOf(restarted.url)
      expect(effects.messages).toHaveLength(1)
      await page.screenshot({ path: screenshotPath('rejoined-after-crash'), fullPage: true })
    } finally {
      await model.close()
    }
  }, 90_000)

  it('a refund waits for approval across a SIGKILL of the server: a reload restores the approval card, and its approval refunds once', async () => {
    const { app, options } = await freshApp()
    const page = await open(app.url)
    await page.getByTestId('input').fill('Refund A-100')
    await page.getByTestId('send').click()
    await page.getByTestId('approval').waitFor({ timeout: 15_000 })
    await app.kill()
    const restarted = await startApp(options)
    running.push(restarted)

    await page.reload()
    await page.getByTestId('model').waitFor()
    await page.getByTestId('approval').waitFor({ timeout: 15_000 })
    expect(await page.getByTestId('approval').innerText()).toContain('refund')
    await page.screenshot({ path: screenshotPath('refund-approval-card'), fullPage: true })
    await page.getByTestId('approve').click()
    await expect.poll(() => lastAnswer(page).innerText(), { timeout: 20_000 }).toBe('Order A-100 is refunded (outbox message #1).')
    expect(await page.getByTestId('approval').count()).toBe(0)
    const effects = await outboxOf(restarted.url)
    expect(effects.messages.map((message) => message.text)).toEqual(['Refund order A-100'])
    await page.screenshot({ path: screenshotPath('refund-approved-after-crash'), fullPage: true })
  }, 90_000)

  it('a declined refund is never issued, and the answer says so', async () => {
    const { app } = await freshApp()
    const page = await open(app.url)
    await page.getByTestId('input').fill('Refund A-100')
    await page.getByTestId('send').click()
    await page.getByTestId('decline').click({ timeout: 15_000 })
    await expect.poll(() => lastAnswer(page).innerText(), { timeout: 20_000 }).toBe('The refund of A-100 was declined: nothing was refunded.')
    const effects = await outboxOf(app.url)
    expect(effects.messages).toHaveLength(0)
  }, 60_000)

  it('a message sent to the thread from a second tab while the answer of the first tab streams is refused with a message that says why', async () => {
    const { app, model } = await appOnSlowModel(slowAnswer(120))
    try {
      const page = await open(app.url)
      await page.getByTestId('input').fill('Tell me a long story')
      await page.getByTestId('send').click()
      await expect.poll(() => lastAnswer(page).innerText().catch(() => ''), { timeout: 10_000 }).toContain('word2')
      // The second tab sends on the same thread before its own hydrate tails the run.
      const second = await browser.newPage()
      await second.route('**/api/chat?threadId=*', (route) => route.fulfill({ status: 404, body: 'not yet' }))
      await second.goto(page.url())
      await second.getByTestId('input').fill('And another one')
      await second.getByTestId('send').click()
      await expect.poll(() => second.getByTestId('chat-error').innerText(), { timeout: 15_000 }).toMatch(/is answering another message; send yours when that answer ends/)
      expect(model.requests).toHaveLength(1)
    } finally {
      await model.close()
    }
  }, 60_000)
})
