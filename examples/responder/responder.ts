/**
 * The responder agent of the reconciliation page: it answers new issues with
 * one comment per run and issue. The comment carries a signed effect marker,
 * and `CommentPosted` finds it again after a crash, trusting only comments
 * written by the tracker account the tool posts as whose marker's signature
 * verifies: anyone can type marker text into a comment, and a bot's comment
 * may quote what someone else typed.
 */
import type { AnyTextAdapter } from '@tanstack/ai'
import { toolDefinition } from '@tanstack/ai'
import * as AI from '@tanstack/ai-effect'
import { Context, Effect, Layer, Option, type Redacted, Schema } from 'effect'
import { Tracker, type TrackerError } from './Tracker.ts'

export const commentDef = toolDefinition({
  name: 'comment',
  description: 'Posts a comment on the issue.',
  inputSchema: AI.toolSchema(Schema.Struct({ issue: Schema.Int, body: Schema.String })),
  outputSchema: AI.toolSchema(Schema.Struct({ commentId: Schema.Int })),
})

type CommentInput = { readonly issue: number; readonly body: string }

/** The responder's signed effect markers. */
export class Markers extends Context.Service<Markers, AI.SignedEffectMarkers>()('examples/responder/Markers') {
  static readonly layer = (secret: Redacted.Redacted<string>) => Layer.sync(Markers, () => AI.signedEffectMarkers(secret))
}

/** Finds the comment an earlier, crashed attempt already posted. */
export class CommentPosted extends AI.Remote<CommentPosted, CommentInput, { readonly commentId: number }, TrackerError>()(
  'examples/responder/CommentPosted',
) {
  static readonly layer = Layer.effect(
    CommentPosted,
    Effect.gen(function* () {
      const tracker = yield* Tracker
      const markers = yield* Markers
      return CommentPosted.of({
        alreadyApplied: (key, { issue }) =>
          tracker.listComments(issue).pipe(
            Effect.map((comments) =>
              Option.fromNullishOr(
                comments.find((comment) => comment.author === tracker.account && markers.find(comment.body).includes(key)),
              ).pipe(Option.map((comment) => ({ commentId: comment.id }))),
            ),
          ),
      })
    }),
  )
}

export const makeResponder = <TAdapter extends AnyTextAdapter>(adapter: TAdapter) =>
  AI.defineAgent({
    name: 'responder',
    adapter,
    instructions: 'Answer new issues.',
    tools: ({ run }) => {
      const keyOf = ({ issue }: CommentInput) => `${run.runId}:comment:${issue}`
      return [
        AI.effectTool(
          commentDef,
          ({ issue, body }, { key }) =>
            Effect.gen(function* () {
              const tracker = yield* Tracker
              const markers = yield* Markers
              const comment = yield* tracker.postComment(issue, `${body}\n${markers.marker(key)}`)
              return { commentId: comment.id }
            }),
          {
            // one comment per run and issue, whatever the body says
            effectKey: keyOf,
            alreadyApplied: CommentPosted,
          },
        ),
      ]
    },
  })
