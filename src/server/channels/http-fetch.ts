/**
 * The fetch the chat channels' API clients are given (grammY's, Slack's Web
 * API client, Discord's REST calls): the daemon's own over node:http and
 * node:https (kernel/upstream-fetch.ts, what model providers use), not the
 * fetch built into Node. That one parses HTTP with llhttp compiled to
 * WebAssembly; once a few responses have gone through it (Telegram's long
 * polling, after some ten calls), V8 compiles its parser again with its
 * optimising compiler on a helper thread, which takes about 23 MB of
 * compiler memory at its peak: glibc keeps 10-12 MB of that in the thread's
 * malloc arena for the rest of the process's life, and the compiler's own
 * code adds 4-5 MB of resident pages. Measured: an idle daemon with one
 * Telegram bot held 96 MB instead of 74 MB without a channel; node:http
 * parses with Node's native llhttp, which costs nothing of the kind.
 *
 * What it does not speak (a form or stream body: a file sent) goes to the
 * built-in fetch. It follows no redirect and asks for no compression, as
 * none of these APIs needs.
 */
import { upstreamFetch } from '../kernel/upstream-fetch.ts';

export const channelFetch: typeof globalThis.fetch = (input, init) => upstreamFetch(input, init, undefined);
