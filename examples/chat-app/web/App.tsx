/**
 * The Effect Chat page: the conversation as it streams, every tool call with
 * its input, progress and result (or tool error), and for effect tools the
 * effect key and how the call was answered. The panel on the right lists
 * what the outbox and the effect store hold.
 *
 * The conversation lives on the server, under the thread id in the page's
 * URL (`?thread=`): a reload, a second tab or another device on that URL
 * hydrates the transcript and rejoins an answer still streaming, and a
 * dropped connection resumes from the last event the page saw. Stop cancels
 * the run on the server, since a run goes on when its page goes away. A
 * refund waits for a person: its card approves or declines it, also after a
 * reload or a restart of the server.
 */
import { fetchServerSentEvents, useChat } from '@tanstack/ai-react'
import { useCallback, useEffect, useMemo, useState } from 'react'

interface Outcome {
  readonly keyDigest: string
  readonly outcome: string
}

interface Effects {
  readonly messages: ReadonlyArray<{ id: number; to: string; text: string; effectKey: string; sentAt: number }>
  readonly effects: ReadonlyArray<{ tool: string; key: string; outcome: string; recordedAt: number }>
}

const examples = ['Where is order A-100?', 'Where is order B-200?', 'Track A-100', 'Notify me about A-100', 'Notify me twice about A-100', 'Refund A-100']

/** The thread in the URL, or a new one written into it, so that a reload or a second tab finds it. */
function threadFromUrl(): string {
  const url = new URL(window.location.href)
  const existing = url.searchParams.get('thread')
  if (existing !== null && existing !== '') return existing
  const threadId = `thread-${crypto.randomUUID()}`
  url.searchParams.set('thread', threadId)
  window.history.replaceState(null, '', url)
  return threadId
}

/** What the page's connection to the answer is doing, beyond what useChat says. */
type Link = 'live' | 'reconnecting' | 'rejoining'

/**
 * The chat's fetch, watched: a request that resumes (`Last-Event-ID`) or
 * joins (`?offset`) a run shows until its response comes, the run id of
 * each message is kept for Stop, and a refusal's reason is kept to show.
 */
function useWatchedFetch() {
  const [link, setLink] = useState<Link>('live')
  const [refusal, setRefusal] = useState<string>()
  const [runId, setRunId] = useState<string>()
  const fetchClient = useMemo<typeof fetch>(
    () => async (input, init) => {
      const headers = new Headers(init?.headers)
      const url = new URL(String(input), window.location.href)
      const resuming = headers.has('Last-Event-ID') ? 'reconnecting' : url.searchParams.has('offset') ? 'rejoining' : undefined
      if (resuming !== undefined) setLink(resuming)
      if (init?.method === 'POST' && !headers.has('Last-Event-ID')) {
        setRefusal(undefined)
        setRunId(headers.get('X-Run-Id') ?? undefined)
      }
      const response = await fetch(input, init)
      if (resuming !== undefined) setLink('live')
      if (!response.ok && init?.method === 'POST') setRefusal(await response.clone().text())
      return response
    },
    [],
  )
  return { fetchClient, link, refusal, runId }
}

export function App() {
  const threadId = useMemo(threadFromUrl, [])
  const { fetchClient, link, refusal, runId } = useWatchedFetch()
  const [progress, setProgress] = useState<Record<string, unknown>>({})
  const [outcomes, setOutcomes] = useState<Record<string, Outcome>>({})
  const [input, setInput] = useState('')
  const [info, setInfo] = useState<{ model: string; offline: boolean }>()
  const [effects, setEffects] = useState<Effects>({ messages: [], effects: [] })

  const { messages, sendMessage, isLoading, stop, error, pendingInterrupts } = useChat({
    // A server that restarts (a deploy, a crash) is back within seconds: keep reconnecting meanwhile.
    connection: fetchServerSentEvents('/api/chat', { fetchClient, reconnect: { maxAttempts: 120, delayMs: 500 } }),
    threadId,
    persistence: true,
    onCustomEvent: (name, data, { toolCallId }) => {
      if (toolCallId === undefined) return
      const value = data as { progress?: unknown; keyDigest?: string; outcome?: string }
      if (name === 'tool-progress') setProgress((all) => ({ ...all, [toolCallId]: value.progress }))
      if (name === 'effect-outcome') setOutcomes((all) => ({ ...all, [toolCallId]: { keyDigest: value.keyDigest!, outcome: value.outcome! } }))
    },
  })

  const refresh = useCallback(() => {
    void fetch('/api/effects').then((response) => response.json()).then(setEffects)
  }, [])
  useEffect(() => {
    void fetch('/api/info').then((response) => response.json()).then(setInfo)
  }, [])
  useEffect(() => {
    if (!isLoading) refresh()
  }, [isLoading, refresh])

  const send = (text: string) => {
    if (text.trim() === '' || isLoading) return
    setInput('')
    void sendMessage(text)
  }

  const cancel = () => {
    stop()
    // Stop on the server too: the run would otherwise go on for a page that reloads.
    if (runId !== undefined) void fetch(`/api/chat?runId=${encodeURIComponent(runId)}`, { method: 'DELETE' })
  }

  // The approvals the run waits for, by tool call: core's interrupt id is `approval_<tool call id>`.
  const approvals = new Map(
    pendingInterrupts.flatMap((interrupt) =>
      interrupt.kind === 'generic' && interrupt.interruptId.startsWith('approval_') ? [[interrupt.interruptId.slice('approval_'.length), interrupt] as const] : [],
    ),
  )

  const results = new Map(
    messages.flatMap((message) => message.parts.flatMap((part) => (part.type === 'tool-result' ? [[part.toolCallId, part] as const] : []))),
  )

  return (
    <div className="layout">
      <main className="chat">
        <header>
          <h1>Effect Chat</h1>
          {info && (
            <span className={info.offline ? 'badge offline' : 'badge'} data-testid="model">
              {info.offline ? 'Offline demo model: no OPENAI_API_KEY set' : info.model}
            </span>
          )}
          <a className="new-thread" href="/" data-testid="new-thread">
            New conversation
          </a>
        </header>
        {link !== 'live' && (
          <div className="notice" role="status" data-testid="reconnecting">
            {link === 'reconnecting' ? 'Connection lost: reconnecting to the answer…' : 'Rejoining the answer…'}
          </div>
        )}
        {(refusal ?? error?.message) !== undefined && link === 'live' && !isLoading && (
          <div className="notice error" role="alert" data-testid="chat-error">
            {refusal ?? error?.message}
          </div>
        )}
        <ol className="messages" data-testid="messages">
          {messages.map((message) => (
            <li key={message.id} className={`message ${message.role}`}>
              {message.parts.map((part, index) => {
                if (part.type === 'text') return <p key={index} data-testid={`${message.role}-text`}>{part.content}</p>
                if (part.type !== 'tool-call') return null
                const result = results.get(part.id)
                const content = typeof result?.content === 'string' ? result.content : undefined
                const error = content === undefined ? undefined : errorOf(content)
                const outcome = outcomes[part.id]
                const approval = approvals.get(part.id)
                return (
                  <div key={part.id} className={`tool ${error ? 'failed' : ''}`} data-testid="tool-call" data-tool={part.name}>
                    <div className="tool-head">
                      <code>{part.name}</code>
                      <span className="args">{part.arguments}</span>
                      {outcome && (
                        <span className={`badge outcome ${outcome.outcome}`} data-testid="outcome">
                          {outcome.outcome}
                        </span>
                      )}
                    </div>
                    {outcome && <div className="key" title="a digest of the effect key">key {outcome.keyDigest}</div>}
                    {progress[part.id] !== undefined && result === undefined && (
                      <div className="progress" data-testid="progress">{JSON.stringify(progress[part.id])}</div>
                    )}
                    {approval !== undefined && (
                      <div className="approval" data-testid="approval">
                        <span>
                          Approve <code>{part.name}</code> {part.arguments}?
                        </span>
                        <button type="button" data-testid="approve" onClick={() => approval.resolveInterrupt({ approved: true })}>
                          Approve
                        </button>
                        <button type="button" className="decline" data-testid="decline" onClick={() => approval.resolveInterrupt({ approved: false })}>
                          Decline
                        </button>
                      </div>
                    )}
                    {result === undefined && approval === undefined && !isLoading && (
                      <div className="stopped" data-testid="stopped">stopped before it finished</div>
                    )}
                    {content !== undefined && (
                      <div className={error ? 'result error' : 'result'} data-testid={error ? 'tool-error' : 'tool-result'}>
                        {error ?? content}
                      </div>
                    )}
                  </div>
                )
              })}
            </li>
          ))}
        </ol>
        <div className="examples">
          {examples.map((example) => (
            <button key={example} type="button" disabled={isLoading} onClick={() => send(example)}>
              {example}
            </button>
          ))}
        </div>
        <form
          className="composer"
          onSubmit={(event) => {
            event.preventDefault()
            send(input)
          }}
        >
          <input value={input} onChange={(event) => setInput(event.target.value)} placeholder="Ask about an order…" data-testid="input" />
          {isLoading ? (
            <button type="button" className="stop" onClick={cancel} data-testid="stop">
              Stop
            </button>
          ) : (
            <button type="submit" data-testid="send">Send</button>
          )}
        </form>
      </main>
      <aside className="effects" data-testid="effects">
        <header>
          <h2>Recorded effects</h2>
          <button type="button" onClick={refresh}>Refresh</button>
        </header>
        <h3>Outbox</h3>
        {effects.messages.length === 0 ? <p className="empty">No notification sent yet.</p> : (
          <ul data-testid="outbox">
            {effects.messages.map((message) => (
              <li key={message.id}>
                <strong>#{message.id}</strong> to {message.to}: {message.text}
                <div className="key">key {message.effectKey}</div>
              </li>
            ))}
          </ul>
        )}
        <h3>Effect store</h3>
        {effects.effects.length === 0 ? <p className="empty">Nothing recorded yet.</p> : (
          <ul data-testid="records">
            {effects.effects.map((effect) => (
              <li key={`${effect.tool}:${effect.key}`}>
                <code>{effect.tool}</code> <span className={`badge outcome ${effect.outcome}`}>{effect.outcome}</span>
                <div className="key">key {effect.key}</div>
              </li>
            ))}
          </ul>
        )}
      </aside>
    </div>
  )
}

/** The tool error the model read, when the result is one. */
function errorOf(content: string): string | undefined {
  try {
    const parsed = JSON.parse(content) as { error?: unknown }
    return typeof parsed.error === 'string' ? parsed.error : undefined
  } catch {
    return undefined
  }
}
