/**
 * `npm run responder`: the responder service of service.ts, configured by
 * its environment as a deployment is:
 *
 * - `DATABASE_URL`: PostgreSQL, for the runs and the effects (required);
 * - `TRACKER_URL`, `TRACKER_TOKEN`: the tracker and the bot's token (required);
 * - `WEBHOOK_SECRET`: what the tracker signs its webhooks with (required);
 * - `MARKER_SECRET`: what the comments' effect markers are signed with (required);
 * - `OPENAI_API_KEY`, and `OPENAI_BASE_URL` for a gateway (required);
 * - `PORT` (default 3001) and `HOST` (default 127.0.0.1). Effect's cluster
 *   reads them too, as the runner's name: one process per port.
 */
import { NodeRuntime } from '@effect/platform-node'
import { createOpenaiChat } from '@tanstack/ai-openai'
import { Layer, Redacted } from 'effect'
import { ResponderService } from './service.ts'

const required = (name: string): string => {
  const value = process.env[name]
  if (value === undefined || value === '') {
    console.error(`The responder needs ${name}.`)
    process.exit(1)
  }
  return value
}

const baseURL = process.env.OPENAI_BASE_URL
NodeRuntime.runMain(
  Layer.launch(
    ResponderService({
      adapter: createOpenaiChat('gpt-5.2', required('OPENAI_API_KEY'), baseURL ? { baseURL } : {}),
      databaseUrl: Redacted.make(required('DATABASE_URL')),
      tracker: { url: required('TRACKER_URL'), token: required('TRACKER_TOKEN') },
      webhookSecret: Redacted.make(required('WEBHOOK_SECRET')),
      markerSecret: Redacted.make(required('MARKER_SECRET')),
      port: Number(process.env.PORT ?? 3001),
      host: process.env.HOST ?? '127.0.0.1',
    }),
  ),
)
