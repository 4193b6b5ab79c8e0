/**
 * The Effect Chat page: the conversation as it streams, every tool call with
 * its input, progress and result (or tool error), and for effect tools the
 * effect key and how the call was answered. A Stop button cancels the run;
 * the panel on the right lists what the outbox and the effect store hold.
 */
import { fetchServerSentEvents, useChat } from '@tanstack/ai-react'
import { useCallback, useEffect, useState } from 'react'

interface Outcome {
  readonly keyDigest: string
  readonly outcome: string
}

interface Effects {
  readonly messages: ReadonlyArray<{ id: number; to: string; text: string; effectKey: string; sentAt: number }>
  readonly effects: ReadonlyArray<{ tool: string; key: string; outcome: string; recordedAt: number }>
}

const examples = ['Where is order A-100?', 'Where is order B-200?', 'Track A-100', 'Notify me about A-100', 'Notify me twice about A-100']

export function App() {
  const [progress, setProgress] = useState<Record<string, unknown>>({})
  const [outcomes, setOutcomes] = useState<Record<string, Outcome>>({})
  const [input, setInput] = useState('')
  const [info, setInfo] = useState<{ model: string; offline: boolean }>()
  const [effects, setEffects] = useState<Effects>({ messages: [], effects: [] })

  const { messages, sendMessage, isLoading, stop } = useChat({
    connection: fetchServerSentEvents('/api/chat'),
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
        </header>
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
                    {result === undefined && !isLoading && <div className="stopped" data-testid="stopped">stopped before it finished</div>}
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
            <button type="button" className="stop" onClick={stop} data-testid="stop">
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
