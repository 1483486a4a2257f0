import { expect } from 'chai';
import pino from 'pino';
import { effectiveConfig } from '../../../../src/shared/config/keys.ts';
import type { GatewayConfig } from '../../../../src/shared/config/types.ts';
import type { AttachmentView } from '../../../../src/shared/protocol/results.ts';
import { VoiceNotes } from '../../../../src/server/agents/voice-notes.ts';
import { Attachments, type Fetched } from '../../../../src/server/channels/attachments.ts';
import { DomainError, rateLimited } from '../../../../src/server/kernel/errors.ts';
import { SessionStore } from '../../../../src/server/sessions/session-store.ts';
import { freshStore } from '../../../support/store.ts';

/** The voice notes of a turn, heard once and kept with their message (the engine here is a recorder of what it was asked: the engines themselves are tested in voice.test.ts). */
describe('agents: voice notes heard before the agent runs, kept with their message', () => {
  const store = freshStore();
  let config: GatewayConfig;
  let sessions: SessionStore;
  let heard: number;
  let hearing: (audio: Buffer) => Promise<{ text: string; seconds: number }>;
  let notes: VoiceNotes;
  let carries: boolean;

  const turn = (recordedId: number, text = '') => ({ channel: 'telegram', agentId: 'helper', sessionKey: 'telegram:default:dm:42', recordedId, text });

  /** A message of the person's with these files, its kept ones stored as the inbox stores them. */
  const said = async (files: (Partial<AttachmentView> & { bytes?: string })[], text = '') => {
    const fetched: Fetched[] = files.map((file, index) => ({
      view: { id: `att_${index}_${Math.random().toString(36).slice(2)}`, name: file.name ?? 'voice.ogg', mimeType: file.mimeType ?? 'audio/ogg', kept: file.kept ?? true, ...(file.voice ? { voice: true } : {}), ...(file.note ? { note: file.note } : {}) },
      ...(file.kept === false ? {} : { data: new TextEncoder().encode(file.bytes ?? 'OggS...') }),
    }));
    return store().transaction(async (tx) => {
      const recorded = await sessions.record({
        channel: 'telegram', account: 'default', kind: 'direct', peer: '42', direction: 'in', sender: '42', text, at: Date.now(), data: { platformId: '9', attachments: fetched.map((file) => file.view) },
      }, tx);
      await new Attachments(store(), pino({ level: 'silent' })).save('telegram', 'default', recorded.session.key, fetched, tx);
      return recorded.message.id;
    });
  };
  const filesOf = async (id: number) => ((await sessions.message(id))!.data!.attachments as AttachmentView[]);

  beforeEach(() => {
    config = effectiveConfig({ channels: { telegram: { enabled: true, voiceReplies: 'when-spoken-to' } }, voice: { maxSeconds: 60 } });
    sessions = new SessionStore(store());
    heard = 0;
    carries = true;
    hearing = async (audio) => ({ text: `words of ${audio.toString()}`, seconds: 3.2 });
    notes = new VoiceNotes({
      config: () => config, sessions, attachments: new Attachments(store(), pino({ level: 'silent' })), log: pino({ level: 'silent' }), carriesVoice: () => carries,
      voice: {
        transcribe: async (audio) => { heard++; return hearing(audio); },
        speak: async () => Buffer.from('OggS spoken'),
      },
    });
  });

  it('hears a voice note once: the transcript is stored with the message, and an answer tried again (a restart) reads it without hearing it again', async () => {
    const id = await said([{ voice: true, bytes: 'note one' }]);
    expect(await notes.hear(turn(id), false)).to.deep.equal({ spoken: true, unheard: [], says: true });
    expect(heard).to.equal(1);
    expect((await filesOf(id))[0]).to.include({ voice: true, transcript: 'words of note one', seconds: 3.2, kept: true });
    expect((await sessions.message(id))!.data!.platformId, 'the message\'s other facts are kept').to.equal('9');
    expect(await notes.hear(turn(id), false)).to.deep.equal({ spoken: true, unheard: [], says: true });
    expect(heard, 'heard once').to.equal(1);
  });

  it('an engine that may answer later is tried again with the job, keeping what was heard; at the last attempt the person is told why', async () => {
    const id = await said([{ voice: true, bytes: 'first' }, { name: 'talk.mp3', mimeType: 'audio/mpeg', bytes: 'second' }]);
    hearing = async (audio) => {
      if (audio.toString() === 'second') throw rateLimited(1000, 'The transcription engine is rate-limiting the gateway');
      return { text: 'turn on the lights', seconds: 2 };
    };
    let thrown: unknown;
    await notes.hear(turn(id), false).catch((error: unknown) => { thrown = error; });
    expect((thrown as DomainError).retryable).to.equal(true);
    expect((await filesOf(id)).map((file) => file.transcript)).to.deep.equal(['turn on the lights', undefined]);
    const last = await notes.hear(turn(id), true);
    expect(heard, 'the first note was not heard again').to.equal(3);
    expect(last).to.deep.equal({ spoken: true, unheard: ['Sorry, I could not listen to the audio file talk.mp3: transcribing it failed; please try again later, or write.'], says: true });
    expect((await filesOf(id))[1]).to.include({ unheard: 'rate_limited' });
  });

  it('tells why for a note too long, one not kept, one without words; a turn of nothing but unheard audio is not for the agent', async () => {
    hearing = async (audio) => {
      if (audio.toString() === 'long') throw new DomainError('invalid', 'The audio is longer than 60 s (voice.maxSeconds).', { code: 'audio_too_long' });
      return { text: ' ', seconds: 1 };
    };
    const id = await said([{ voice: true, bytes: 'long' }, { voice: true, kept: false, note: 'not kept: larger than this channel\'s limit of 64 KB' }, { voice: true, bytes: 'silence' }]);
    expect(await notes.hear(turn(id), false)).to.deep.equal({
      spoken: false, says: false,
      unheard: [
        'Sorry, I could not listen to your voice note: it is longer than 60 seconds, the longest I listen to; please send a shorter one, or write.',
        'Sorry, I could not listen to your voice note: I could not take the file (larger than this channel\'s limit of 64 KB).',
        'Sorry, I could not listen to your voice note: I heard no words in it; please record it again, or write.',
      ],
    });
    const files = await filesOf(id);
    expect(files.map((file) => file.unheard)).to.deep.equal(['audio_too_long', undefined, 'no_words']);
    expect(files[0]!.note).to.equal('not transcribed: The audio is longer than 60 s (voice.maxSeconds).');
    // Words besides the audio are still for the agent.
    const captioned = await said([{ voice: true, bytes: 'long' }], 'see the note');
    expect((await notes.hear(turn(captioned, 'see the note'), false)).says).to.equal(true);
    // A message without audio is not looked at further.
    const plain = await said([{ name: 'photo.jpg', mimeType: 'image/jpeg' }]);
    expect(await notes.hear(turn(plain), false)).to.deep.equal({ spoken: false, unheard: [], says: true });
  });

  it('speaks back as voiceReplies says, where the channel carries voice notes', () => {
    expect(notes.speaks('telegram', true)).to.equal(true);
    expect(notes.speaks('telegram', false)).to.equal(false);
    config = effectiveConfig({ channels: { telegram: { enabled: true, voiceReplies: 'always' } } });
    expect(notes.speaks('telegram', false)).to.equal(true);
    carries = false;
    expect(notes.speaks('telegram', true), 'a channel that cannot send them').to.equal(false);
    config = effectiveConfig({ channels: { telegram: { enabled: true } } });
    carries = true;
    expect(notes.speaks('telegram', true), 'off by default').to.equal(false);
  });
});
