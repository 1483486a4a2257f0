/**
 * Voice: speech to text (voice notes, POST /v1/audio/transcriptions) and text
 * to speech (spoken answers, POST /v1/audio/speech) on the engines of
 * voice.transcribe and voice.speak. Audio is decoded and encoded by ffmpeg
 * and a command engine runs, both in the sandbox; at most voice.concurrency
 * calls at once. Every call is recorded with the model calls (`gateway usage`).
 */
import { ERROR_KINDS } from '../../shared/error-kinds.ts';
import { DomainError } from '../kernel/errors.ts';
import { defineModule } from '../kernel/module.ts';
import modelsModule from '../models/module.ts';
import { decodeForEngine, encodeSpeech, type SpeechFormat } from './audio.ts';
import { withContained } from './contained.ts';
import { onPath, speak, speaker, transcribe, transcriber, type Engine } from './engines.ts';
import { Slots } from './slots.ts';

export type { SpeechFormat } from './audio.ts';
export { isSpeechFormat, SPEECH_FORMATS } from './audio.ts';

/** Who a voice call is for, as the model calls' log records it. */
export interface VoiceMeta {
  subject?: string;
  agent?: string;
  sessionKey?: string;
  /** api (the HTTP endpoints) or a channel's name. */
  surface: string;
  /** Wait for a free slot (a channel's voice note) instead of being refused 429 (an HTTP caller). */
  wait?: boolean;
}

export interface Voice {
  /** The words of an audio file in any format ffmpeg reads, with its length. */
  transcribe(audio: Buffer, meta: VoiceMeta): Promise<{ text: string; seconds: number }>;
  /** A text spoken, in the format asked for. */
  speak(text: string, format: SpeechFormat, meta: VoiceMeta & { voice?: string }): Promise<Buffer>;
  /** Whether each direction has an engine, and which (or why not). */
  engines(): { transcribe: EngineView; speak: EngineView };
}

export interface EngineView {
  engine?: string;
  kind: Engine['kind'];
  /** Why it cannot run, when it cannot. */
  unavailable?: string;
}

const view = (engine: Engine): EngineView => {
  if (engine.kind === 'off') return { kind: 'off', unavailable: engine.why };
  if (!onPath('ffmpeg')) return { kind: engine.kind, engine: engine.name, unavailable: 'ffmpeg is not installed (apt-get install ffmpeg)' };
  return { kind: engine.kind, engine: engine.name };
};

export default defineModule<Voice>({
  id: 'voice',
  needs: [modelsModule],
  setup(ctx) {
    const models = ctx.use(modelsModule);
    const slots = new Slots();
    const key = (name: string) => async () => {
      try {
        return (await ctx.secrets.get(name)) ?? undefined;
      } catch {
        return undefined;
      }
    };

    /** Runs one call in a slot and a folder of its own, recorded as a model call of the engine. */
    const call = async <T>(engine: Engine, meta: VoiceMeta, work: Parameters<typeof withContained<T>>[0]): Promise<T> => {
      const started = Date.now();
      const release = await slots.take(ctx.config().voice.concurrency, meta.wait === true);
      const record = (outcome: 'ok' | 'error' | 'timeout', error?: DomainError | Error) => {
        if (engine.kind === 'off') return;
        models.usage.record({
          at: started, provider: 'voice', model: engine.name, subject: meta.subject, agent: meta.agent, sessionKey: meta.sessionKey, surface: meta.surface,
          latencyMs: Date.now() - started, outcome, ...(error ? { error: error.message.slice(0, 500), status: error instanceof DomainError ? ERROR_KINDS[error.kind].status : 500 } : {}),
        }, (failure) => ctx.log.warn({ err: failure }, 'a voice call could not be recorded'));
      };
      try {
        const result = await withContained(work);
        record('ok');
        return result;
      } catch (error) {
        // Bad audio is the caller's, not the engine's: recorded only when an engine was asked.
        if (!(error instanceof DomainError && error.kind === 'invalid')) record(error instanceof DomainError && error.reason === 'voice_timeout' ? 'timeout' : 'error', error as Error);
        throw error;
      } finally {
        release();
      }
    };

    const ffmpeg = () => {
      if (!onPath('ffmpeg')) throw new DomainError('unavailable', 'Voice needs ffmpeg, which is not installed on the gateway\'s host: apt-get install ffmpeg', { code: 'ffmpeg_missing' });
    };

    return {
      async transcribe(audio, meta) {
        const settings = ctx.config().voice;
        const engine = transcriber(settings);
        if (engine.kind === 'off') throw new DomainError('unavailable', `Transcription is off: ${engine.why}.`, { code: 'transcription_off' });
        ffmpeg();
        if (audio.length > settings.maxMB * 1024 * 1024) throw new DomainError('too_large', `The audio is larger than ${settings.maxMB} MB (voice.maxMB).`, { code: 'audio_too_large' });
        if (audio.length === 0) throw new DomainError('invalid', 'The audio file is empty.', { code: 'bad_audio' });
        const timeoutMs = settings.transcribe.timeoutSeconds * 1000;
        return call(engine, meta, async (contained) => {
          await contained.write('received', audio);
          const { file, seconds } = await decodeForEngine(contained, 'received', settings.maxSeconds, timeoutMs);
          const text = await transcribe(engine, { contained, file, timeoutMs, language: settings.transcribe.language, apiKey: key('voice.transcribe.apiKey') });
          return { text, seconds };
        });
      },
      async speak(text, format, meta) {
        const settings = ctx.config().voice;
        const engine = speaker(settings);
        if (engine.kind === 'off') throw new DomainError('unavailable', `Speech is off: ${engine.why}.`, { code: 'speech_off' });
        ffmpeg();
        if (text.length > settings.speak.maxChars) throw new DomainError('invalid', `The text is longer than ${settings.speak.maxChars} characters (voice.speak.maxChars).`, { code: 'text_too_long' });
        const timeoutMs = settings.speak.timeoutSeconds * 1000;
        return call(engine, meta, async (contained) => {
          // A server takes the caller's voice; a command speaks in the one configured (a client's "alloy" means nothing to espeak-ng).
          const voice = engine.kind === 'openai-compatible' ? meta.voice ?? settings.speak.voice : settings.speak.voice;
          const written = await speak(engine, { contained, text, voice, timeoutMs, apiKey: key('voice.speak.apiKey') });
          return encodeSpeech(contained, written, format, timeoutMs);
        });
      },
      engines() {
        const settings = ctx.config().voice;
        return { transcribe: view(transcriber(settings)), speak: view(speaker(settings)) };
      },
    };
  },
});
