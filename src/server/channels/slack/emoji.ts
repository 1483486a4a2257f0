/**
 * Slack names its reactions (\"eyes\", \"+1\"), where the gateway's settings
 * and tools give the emoji itself: the common ones by name, and a name
 * given as such (\"eyes\", \":eyes:\") as it is.
 */
const NAMES: Record<string, string> = {
  '👀': 'eyes', '👍': '+1', '👎': '-1', '❤️': 'heart', '❤': 'heart', '🔥': 'fire', '🎉': 'tada', '✅': 'white_check_mark', '❌': 'x',
  '🙏': 'pray', '👌': 'ok_hand', '🤔': 'thinking_face', '😁': 'grin', '😂': 'joy', '🙂': 'slightly_smiling_face', '😢': 'cry', '⏳': 'hourglass_flowing_sand',
  '👋': 'wave', '💯': '100', '🚀': 'rocket', '⭐': 'star', '✔️': 'heavy_check_mark', '👏': 'clap', '😮': 'open_mouth',
};

/** The Slack name of a reaction; undefined for an emoji it has no name for here. */
export function slackReaction(emoji: string): string | undefined {
  const named = /^:?([a-z0-9_+-]{1,60}):?$/.exec(emoji);
  if (named) return named[1];
  return NAMES[emoji] ?? NAMES[emoji.replace(/\uFE0F/g, '')];
}
