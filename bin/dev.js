#!/usr/bin/env node
// Runs the TypeScript sources directly (Node's type stripping), for development.
import { execute } from '@oclif/core';

await execute({ development: true, dir: import.meta.url });
