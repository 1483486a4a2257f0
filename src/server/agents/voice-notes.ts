/**
 * Voice on channels, for the agent that answers them: a turn's voice notes
 * and audio files heard (transcribed on voice.transcribe) before the agent
 * runs, each transcript stored with its message, so an answer tried again
 * after a restart never hears it twice; what cannot be heard is told to the
 * person, with why. And an answer spoken back (voice.speak, OGG/Opus or the
 * AAC of platforms whose voice notes are AAC) where
 * channels.<id>.voiceReplies asks for it.
 */
import type { Logger } from 'pino';
import { isAudio } from '../../shared/attachments.ts';
import type { GatewayConfig } from '../../shared/config/types.ts';
import type { AttachmentView } from '../../shared/protocol/results.ts';
import { plainText, type Attachments } from '../channels/module.ts';
import { toDomainError } from '../kernel/errors.ts';
import type { Sessions } from '../sessions/module.ts';
import { SPEECH_FORMATS, type Voice } from '../voice/module.ts';

/** What the turn's audio came to. */
export interface Hearing {
  /** Whether the person spoke: a voice note or audio file of the turn was heard. */
  spoken: boolean;
  /** Why audio of the turn could not be heard, for the person, one line each. */
  unheard: string[];
  /** Whether the turn holds anything for the agent (text, words heard, other files). */
  says: boolean;
}

/** A voice note to send: the answer spoken, as the platform's voice notes are (OGG/Opus, or AAC). */
export interface SpokenAnswer {
  data: Uint8Array;
  mimeType: string;
}

export type VoiceReplies = 'off' | 'when-spoken-to' | 'always';

export interface VoiceNotesDeps {
  config: () => GatewayConfig;
  voice: Pick<Voice, 'transcribe' | 'speak'>;
  sessions: Pick<Sessions['store'], 'message' | 'setData'>;
  attachments: Pick<Attachments, 'load'>;
  /** Whether a channel sends voice notes (it runs here, and its platform carries them). */
  carriesVoice: (channel: string) => boolean;
  /** The audio a channel's voice notes go as: OGG/Opus, or AAC (Signal, Delta Chat); OGG/Opus when left out. */
  voiceFormat?: (channel: string) => 'opus' | 'aac';
  log: Logger;
}

/** The turn a voice call is for, as the model calls' log records it. */
export interface VoiceTurn {
  channel: string;
  agentId: string;
  sessionKey: string;
  recordedId: number;
  text: string;
}

/** What a person is told of a voice note that could not be heard, by the error's code (the operator's detail stays in the session). */
function toldWhy(file: AttachmentView, maxSeconds: number): string {
  // A file not kept (too large for the channel, not fetched) says why in its note already.
  if (!file.kept) return `I could not take the file (${(file.note ?? '').replace(/^not kept: /, '') || 'it was not fetched'})`;
  switch (file.unheard) {
    case 'audio_too_long': return `it is longer than ${maxSeconds} seconds, the longest I listen to; please send a shorter one, or write`;
    case 'audio_too_large': return 'the file is larger than I take; please send a shorter one, or write';
    case 'bad_audio': case 'audio_timeout': return 'its sound could not be read; please record it again, or write';
    case 'no_words': return 'I heard no words in it; please record it again, or write';
    case 'transcription_off': case 'ffmpeg_missing': case 'sandbox_missing': return 'this assistant cannot listen to voice notes yet (its operator has set up no speech-to-text); please write instead';
    default: return 'transcribing it failed; please try again later, or write';
  }
}

export class VoiceNotes {
  private readonly deps: VoiceNotesDeps;

  constructor(deps: VoiceNotesDeps) {
    this.deps = deps;
  }

  /**
   * Hears the turn's audio not heard yet, storing each transcript (or why it
   * could not be heard) in the message's attachments. An engine that may
   * answer later (down, rate-limiting) is tried again with the answer's job
   * unless this is its last attempt.
   */
  async hear(turn: VoiceTurn, lastAttempt: boolean): Promise<Hearing> {
    const { sessions, voice, log } = this.deps;
    const message = await sessions.message(turn.recordedId);
    const files = [...((message?.data?.attachments as AttachmentView[] | undefined) ?? [])];
    if (!message || !files.some(isAudio)) return { spoken: false, unheard: [], says: true };
    const maxSeconds = this.deps.config().voice.maxSeconds;
    const store = () => sessions.setData(turn.sessionKey, turn.recordedId, { ...message.data, attachments: files });
    const noted = (index: number, reason: string, code: string) => {
      files[index] = { ...files[index]!, note: `not transcribed: ${reason}`, unheard: code };
    };
    for (const [index, file] of files.entries()) {
      if (!isAudio(file) || file.transcript !== undefined || file.unheard !== undefined || !file.kept) continue;
      const stored = (await this.deps.attachments.load(turn.sessionKey, [file.id])).get(file.id);
      if (!stored) {
        noted(index, 'its file is gone', 'gone');
        continue;
      }
      try {
        const heard = await voice.transcribe(Buffer.from(stored.data), { surface: turn.channel, agent: turn.agentId, sessionKey: turn.sessionKey, wait: true });
        if (heard.text.trim()) files[index] = { ...file, transcript: heard.text.trim(), seconds: heard.seconds };
        else noted(index, 'no words were heard in it', 'no_words');
      } catch (thrown) {
        const { error } = toDomainError(thrown);
        if (error.retryable && !lastAttempt) {
          // What was heard so far stays heard.
          await store();
          throw thrown;
        }
        log.warn({ channel: turn.channel, session: turn.sessionKey, file: file.name, error: error.message }, 'a voice note could not be transcribed; the sender is told why');
        noted(index, error.message, error.reason ?? error.kind);
      }
      // Each one stored as it is heard: a restart hears only the rest.
      await store();
    }
    const unheard: string[] = [];
    for (const file of files) {
      if (!isAudio(file) || file.transcript !== undefined) continue;
      const what = file.voice ? 'your voice note' : `the audio file ${file.name}`;
      unheard.push(`Sorry, I could not listen to ${what}: ${toldWhy(file, maxSeconds)}.`);
    }
    const spoken = files.some((file) => file.transcript !== undefined);
    const says = spoken || turn.text.trim().length > 0 || files.some((file) => !isAudio(file));
    return { spoken, unheard, says };
  }

  /** Whether an answer is spoken back on this channel: voiceReplies always, or when-spoken-to and the person spoke. */
  speaks(channel: string, spoken: boolean): boolean {
    const mode = ((this.deps.config().channels[channel] as { voiceReplies?: VoiceReplies } | undefined)?.voiceReplies) ?? 'off';
    if (mode === 'off' || (mode === 'when-spoken-to' && !spoken)) return false;
    return this.deps.carriesVoice(channel);
  }

  /** An answer spoken as the channel's voice note (OGG/Opus, or AAC); undefined when it could not be (the text goes alone, and the operator's log says why). */
  async speak(turn: VoiceTurn, text: string): Promise<SpokenAnswer | undefined> {
    const { maxChars } = this.deps.config().voice.speak;
    const said = plainText(text).replace(/\s+/g, ' ').trim().slice(0, maxChars);
    if (!said) return undefined;
    try {
      const format = this.deps.voiceFormat?.(turn.channel) ?? 'opus';
      const data = await this.deps.voice.speak(said, format, { surface: turn.channel, agent: turn.agentId, sessionKey: turn.sessionKey, wait: true });
      return { data, mimeType: SPEECH_FORMATS[format].type };
    } catch (thrown) {
      this.deps.log.warn({ channel: turn.channel, session: turn.sessionKey, error: toDomainError(thrown).error.message }, 'an answer could not be spoken; it goes as text alone');
      return undefined;
    }
  }
}
