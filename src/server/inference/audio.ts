/**
 * The OpenAI-compatible audio endpoints on the voice engines:
 * POST /v1/audio/transcriptions (multipart: file, model, response_format
 * json|text|verbose_json, language, prompt, temperature) answering {text},
 * and POST /v1/audio/speech ({model, input, voice, response_format, speed})
 * answering the audio's bytes. Any model value selects the configured engine.
 */
import type { RouteContext } from '../kernel/module.ts';
import { DomainError } from '../kernel/errors.ts';
import { isSpeechFormat, SPEECH_FORMATS, type Voice } from '../voice/module.ts';
import { badField } from './errors.ts';

/** Fields of a transcription request the gateway takes (the engine decides the rest). */
const TRANSCRIPTION_FIELDS = new Set(['file', 'model', 'response_format', 'language', 'prompt', 'temperature', 'timestamp_granularities[]', 'stream']);
const SPEECH_FIELDS = new Set(['model', 'input', 'voice', 'response_format', 'speed', 'instructions', 'stream_format']);

/** The parts of a multipart/form-data body (400 when it does not parse as one). */
async function formOf(http: RouteContext): Promise<FormData> {
  const received = http.received!;
  try {
    return await new Response(new Uint8Array(received.raw), { headers: { 'content-type': String(http.req.headers['content-type']) } }).formData();
  } catch {
    throw badField('file', 'The body is not a valid multipart/form-data form: send the audio as its file part.');
  }
}

export async function transcription(http: RouteContext, voice: Voice, meta: { subject: string }): Promise<void> {
  const form = await formOf(http);
  for (const name of form.keys()) {
    if (!TRANSCRIPTION_FIELDS.has(name)) throw badField(name, `Unsupported field: ${name}.`, 'unsupported_parameter');
  }
  const file = form.get('file');
  if (file === null || typeof file === 'string') throw badField('file', 'file is required: the audio, as a file part of the form.');
  const model = form.get('model');
  if (typeof model !== 'string' || !model) throw badField('model', 'model is required (any value: the gateway transcribes with voice.transcribe).');
  const format = form.get('response_format') ?? 'json';
  if (format !== 'json' && format !== 'text' && format !== 'verbose_json') throw badField('response_format', 'response_format must be json, text or verbose_json.');
  if (form.get('stream') === 'true') throw badField('stream', 'Streamed transcriptions are not supported.', 'unsupported_parameter');
  const { text, seconds } = await voice.transcribe(Buffer.from(await file.arrayBuffer()), { subject: meta.subject, surface: 'api' });
  if (format === 'text') {
    http.type = 'text/plain; charset=utf-8';
    http.body = `${text}\n`;
    return;
  }
  http.body = format === 'verbose_json' ? { task: 'transcribe', duration: seconds, text, segments: [] } : { text };
}

export async function speech(http: RouteContext, voice: Voice, meta: { subject: string }): Promise<void> {
  const request = http.received!.value;
  if (!request || typeof request !== 'object' || Array.isArray(request)) throw badField('body', 'The body must be a JSON object {model, input, voice}.');
  const fields = request as Record<string, unknown>;
  for (const name of Object.keys(fields)) {
    if (!SPEECH_FIELDS.has(name)) throw badField(name, `Unsupported field: ${name}.`, 'unsupported_parameter');
  }
  const { model, input, voice: voiceName, response_format: format = 'mp3', speed, stream_format: streamFormat } = fields;
  if (typeof model !== 'string' || !model) throw badField('model', 'model is required (any value: the gateway speaks with voice.speak).');
  if (typeof input !== 'string' || input.trim().length === 0) throw badField('input', 'input is required: the text to speak.');
  if (voiceName !== undefined && (typeof voiceName !== 'string' || voiceName.length > 200)) throw badField('voice', 'voice must be a name of at most 200 characters.');
  if (!isSpeechFormat(format)) throw badField('response_format', `response_format must be one of ${Object.keys(SPEECH_FORMATS).join(', ')}.`);
  if (speed !== undefined && (typeof speed !== 'number' || speed < 0.25 || speed > 4)) throw badField('speed', 'speed must be a number from 0.25 to 4.');
  if (speed !== undefined && speed !== 1) throw badField('speed', 'Only speed 1 is supported.', 'unsupported_parameter');
  if (streamFormat !== undefined && streamFormat !== 'audio') throw badField('stream_format', 'Only stream_format audio is supported.', 'unsupported_parameter');
  const audio = await voice.speak(input, format, { subject: meta.subject, surface: 'api', ...(typeof voiceName === 'string' ? { voice: voiceName } : {}) });
  if (audio.length === 0) throw new DomainError('upstream', 'The speech engine wrote no audio.', { code: 'no_audio' });
  http.type = SPEECH_FORMATS[format].type;
  http.body = audio;
}
