/**
 * The daemon's built-in modules, one line each: a feature is its folder and
 * its line here. Order is free; each module's `needs` decide the order of
 * set-up and start (and the reverse, of stop).
 */
export { default as core } from './core/module.ts';
export { default as pairing } from './pairing/module.ts';
export { default as nodes } from './nodes/module.ts';
export { default as tokens } from './tokens/module.ts';
export { default as jobs } from './jobs/module.ts';
export { default as models } from './models/module.ts';
export { default as webhooks } from './webhooks/module.ts';
export { default as hooks } from './hooks/module.ts';
export { default as inference } from './inference/module.ts';
export { default as agents } from './agents/module.ts';
export { default as channels } from './channels/module.ts';
export { default as sessions } from './sessions/module.ts';
export { default as tools } from './tools/module.ts';
export { default as surfaces } from './surfaces/module.ts';
export { default as plugins } from './plugins/module.ts';
export { default as overlay } from './overlay/module.ts';
export { default as discovery } from './discovery/module.ts';
export { default as mcp } from './mcp/module.ts';
export { default as controlUi } from './control-ui/module.ts';
export { default as logs } from './logs/module.ts';
export { default as cluster } from './cluster/module.ts';
export { default as metrics } from './metrics/module.ts';
export { default as automations } from './automations/module.ts';
export { default as toolbox } from './toolbox/module.ts';
export { default as approvals } from './approvals/module.ts';
export { default as memory } from './memory/module.ts';
export { default as voice } from './voice/module.ts';
export { default as skills } from './skills/module.ts';
export { default as telemetry } from './telemetry/module.ts';
