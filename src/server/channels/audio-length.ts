/**
 * How long a voice note to send lasts, read from its bytes (platforms that
 * show a voice note's length want it with the file: Matrix's m.audio).
 */

/** Opus counts its samples at 48 kHz, whatever the rate it was recorded at. */
const OPUS_RATE = 48_000;

/**
 * The seconds of an OGG/Opus file: the last page's granule position (its
 * samples so far) less the pre-skip its OpusHead names. Undefined for bytes
 * that are not OGG/Opus, or that do not say.
 */
export function oggOpusSeconds(data: Uint8Array): number | undefined {
  const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  if (bytes.length < 64 || bytes.toString('latin1', 0, 4) !== 'OggS') return undefined;
  const head = bytes.indexOf('OpusHead', 0, 'latin1');
  if (head < 0 || head + 12 > bytes.length) return undefined;
  const preSkip = bytes.readUInt16LE(head + 10);
  const last = bytes.lastIndexOf('OggS', bytes.length - 27, 'latin1');
  if (last < 0) return undefined;
  const granule = bytes.readBigInt64LE(last + 6);
  if (granule <= 0n) return undefined;
  const seconds = (Number(granule) - preSkip) / OPUS_RATE;
  return Number.isFinite(seconds) && seconds > 0 ? seconds : undefined;
}
