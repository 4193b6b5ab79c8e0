/**
 * Helpers shared by the scripted adapter and the fake OpenAI server.
 */
import type { ScriptedReply } from "./ScriptedText.ts"

/** The text deltas of a reply, in order. */
export const textDeltas = (reply: ScriptedReply): ReadonlyArray<string> =>
  reply.text === undefined ? [] : typeof reply.text === "string" ? [reply.text] : reply.text
