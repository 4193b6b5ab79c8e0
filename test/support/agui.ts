/**
 * The AG-UI request body a client posts to a chat route.
 */

/** The body of a chat request with one user message, as a TanStack AI client sends it. */
export const chatRequestBody = (ids: { readonly threadId: string; readonly runId: string }, question: string): string =>
  JSON.stringify({
    ...ids,
    messages: [{ id: 'm1', role: 'user', content: question }],
    tools: [],
    context: [],
    forwardedProps: {},
    state: {},
  })
