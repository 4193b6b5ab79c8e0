/**
 * The app's tools: the seed's `get_order`, a `notify` effect tool whose side
 * effect (a row in the outbox) applies at most once per conversation and
 * input, a slow `track_shipment` that reports progress and can be stopped,
 * and a `refund` that a person approves first and that is issued at most
 * once per conversation and order.
 */
import { toolDefinition } from '@tanstack/ai'
import * as AI from '@tanstack/ai-effect'
import { Duration, Effect, Schema, Stream } from 'effect'
import { getOrder } from '../orders/tools.ts'
import { Outbox } from './Outbox.ts'

export { getOrder }

export const notifyDef = toolDefinition({
  name: 'notify',
  description: 'Sends the customer a notification',
  inputSchema: AI.toolSchema(Schema.Struct({ to: Schema.String, text: Schema.String })),
  outputSchema: AI.toolSchema(Schema.Struct({ messageId: Schema.Int })),
})

export const notify = AI.effectTool(
  notifyDef,
  ({ to, text }, { key }) =>
    Effect.gen(function* () {
      const outbox = yield* Outbox
      const message = yield* outbox.send({ to, text, effectKey: key })
      return { messageId: message.id }
    }),
  {
    // One notification per conversation and input: asking again, in this run
    // or after a restart, replays the first one.
    effectKey: (input, { run }) => Effect.map(AI.EffectKey.fingerprint(input), (digest) => `${run.threadId}:notify:${digest}`),
  },
)

export const trackShipmentDef = toolDefinition({
  name: 'track_shipment',
  description: 'Follows a shipment until it arrives; takes a few seconds',
  inputSchema: AI.toolSchema(Schema.Struct({ id: Schema.String })),
  outputSchema: AI.toolSchema(Schema.Struct({ id: Schema.String, status: Schema.String })),
})

const legs = ['left the warehouse', 'reached the sorting center', 'is out for delivery', 'arrived']

export const trackShipment = AI.serverTool(trackShipmentDef, ({ id }) =>
  Stream.fromIterable(legs).pipe(
    Stream.tap(() => Effect.sleep(Duration.millis(900))),
    Stream.map((status) => ({ id, status })),
    // What a real tool would close: a connection, a subscription.
    Stream.onExit((exit) =>
      exit._tag === 'Failure' ? Effect.logInfo(`track_shipment for ${id} was interrupted; its finalizer ran`) : Effect.void,
    ),
  ),
)

export const refundDef = toolDefinition({
  name: 'refund',
  description: 'Refunds an order; a person approves it first',
  needsApproval: true,
  inputSchema: AI.toolSchema(Schema.Struct({ id: Schema.String })),
  outputSchema: AI.toolSchema(Schema.Struct({ id: Schema.String, messageId: Schema.Int })),
})

export const refund = AI.effectTool(
  refundDef,
  ({ id }, { key }) =>
    Effect.gen(function* () {
      const outbox = yield* Outbox
      const message = yield* outbox.send({ to: 'payments@example.com', text: `Refund order ${id}`, effectKey: key })
      return { id, messageId: message.id }
    }),
  // One refund per conversation and order, however often it is approved or retried.
  { effectKey: ({ id }, { run }) => Effect.succeed(`${run.threadId}:refund:${id}`) },
)
