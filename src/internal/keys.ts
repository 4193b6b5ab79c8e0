/**
 * The default effect key, from a digest already computed: the pipeline
 * hashes an input once, for the key and the record's fingerprint alike.
 */
export const perRunKey = (context: { readonly run: { readonly runId: string }; readonly toolName: string }, digest: string): string =>
  `${context.run.runId}:${context.toolName}:${digest}`
