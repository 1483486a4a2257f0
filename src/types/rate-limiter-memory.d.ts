// The in-memory limiter alone: the package's index also loads every storage adapter.
declare module 'rate-limiter-flexible/lib/RateLimiterMemory.js' {
  import { RateLimiterMemory } from 'rate-limiter-flexible';
  export default RateLimiterMemory;
}
