/**
 * A small issue tracker for the responder example: issues and comments in
 * memory, served as JSON over HTTP on 127.0.0.1. Requests authenticate with a
 * bearer token; the token decides the author of a comment.
 *
 *   GET  /user                       the account of the token
 *   GET  /issues/:number/comments    the comments of an issue
 *   POST /issues/:number/comments    { body } adds a comment by the account
 *
 * Opening an issue delivers a webhook, as hosted trackers do: a POST of
 * `{ action: "opened", issue: { number, title, body } }` to the webhook's URL,
 * signed with its secret (`x-tracker-signature: sha256=<HMAC-SHA256 of the
 * body, hex>`).
 */
import { createHmac } from 'node:crypto'
import { once } from 'node:events'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

export interface Issue {
  readonly number: number
  readonly title: string
  readonly body: string
}

/** The signature of a webhook delivery's body. */
export const webhookSignature = (secret: string, body: string): string =>
  `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`

export interface Comment {
  readonly id: number
  readonly issue: number
  readonly author: string
  readonly body: string
}

export interface TrackerServer {
  readonly url: string
  readonly comments: ReadonlyArray<Comment>
  /** Adds a comment as any author, the way a person types into the web page. */
  readonly addComment: (issue: number, author: string, body: string) => Comment
  /**
   * Holds the response of the next comment it accepts: the comment is stored,
   * but the client hears nothing, as when the poster crashes right after the
   * tracker accepted the comment. Resolves once that comment is stored.
   */
  readonly holdNextResponse: () => Promise<Comment>
  /** Where "opened" webhooks go, and the secret they are signed with. */
  readonly setWebhook: (webhook: { readonly url: string; readonly secret: string }) => void
  /** Opens an issue and delivers its webhook: resolves with the delivery's HTTP status. */
  readonly openIssue: (title: string, body: string) => Promise<{ readonly issue: Issue; readonly status: number }>
  /** Delivers an issue's webhook again, as trackers do when a delivery timed out. */
  readonly redeliver: (issue: Issue) => Promise<number>
  /** Resolves with the next comment the tracker stores. */
  readonly nextComment: () => Promise<Comment>
  readonly listening: () => boolean
  readonly close: () => Promise<void>
}

export async function startTracker(accounts: Record<string, string>): Promise<TrackerServer> {
  const comments: Array<Comment> = []
  const issues: Array<Issue> = []
  let hold: ((comment: Comment) => void) | undefined
  let webhook: { readonly url: string; readonly secret: string } | undefined
  const commentWaiters: Array<(comment: Comment) => void> = []
  const addComment = (issue: number, author: string, body: string): Comment => {
    const comment = { id: comments.length + 1, issue, author, body }
    comments.push(comment)
    for (const waiter of commentWaiters.splice(0)) waiter(comment)
    return comment
  }
  const deliver = async (issue: Issue): Promise<number> => {
    if (webhook === undefined) throw new Error('No webhook is set')
    const body = JSON.stringify({ action: 'opened', issue })
    const response = await fetch(webhook.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-tracker-signature': webhookSignature(webhook.secret, body) },
      body,
    })
    await response.arrayBuffer()
    return response.status
  }

  const server = createServer(async (req, res) => {
    const account = accounts[(req.headers.authorization ?? '').replace(/^Bearer /, '')]
    if (account === undefined) return send(res, 401, { message: 'Bad credentials' })
    const path = new URL(req.url ?? '/', 'http://tracker').pathname
    if (req.method === 'GET' && path === '/user') return send(res, 200, { login: account })
    const match = path.match(/^\/issues\/(\d+)\/comments$/)
    if (match === null) return send(res, 404, { message: 'Not Found' })
    const issue = Number(match[1])
    if (req.method === 'GET') return send(res, 200, comments.filter((comment) => comment.issue === issue))
    if (req.method === 'POST') {
      const { body } = JSON.parse(await readBody(req)) as { body?: unknown }
      if (typeof body !== 'string') return send(res, 422, { message: 'body must be a string' })
      const comment = addComment(issue, account, body)
      if (hold !== undefined) {
        hold(comment)
        hold = undefined
        return // the response never comes
      }
      return send(res, 201, comment)
    }
    return send(res, 405, { message: 'Method Not Allowed' })
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    comments,
    addComment,
    holdNextResponse: () => new Promise((resolve) => (hold = resolve)),
    setWebhook: (next) => {
      webhook = next
    },
    openIssue: async (title, body) => {
      const issue = { number: issues.length + 1, title, body }
      issues.push(issue)
      return { issue, status: await deliver(issue) }
    },
    redeliver: deliver,
    nextComment: () => new Promise((resolve) => commentWaiters.push(resolve)),
    listening: () => server.listening,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections()
        server.close((error) => (error ? reject(error) : resolve()))
      }),
  }
}

function send(res: ServerResponse, status: number, body: unknown) {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body))
}

async function readBody(req: IncomingMessage): Promise<string> {
  let body = ''
  for await (const chunk of req) body += chunk
  return body
}
