#!/usr/bin/env node
// Runs the TypeScript sources directly (Node's type stripping), for development.
import { execute } from '@oclif/core';

// The project's package.json, not bin/package.json (which makes bin/run.js CommonJS).
await execute({ development: true, dir: new URL('../package.json', import.meta.url).href });
