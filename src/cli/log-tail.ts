export { lastLines } from '../shared/last-lines.ts';
export { renderLogLine } from '../shared/log-line.ts';
