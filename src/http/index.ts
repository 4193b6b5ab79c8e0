/**
 * Chat routes on `effect/http`: an AG-UI request in, server-sent events out,
 * without web `Request`/`Response` conversions.
 *
 * @since 0.1.0
 */
export * as ChatRoute from "./ChatRoute.ts"
