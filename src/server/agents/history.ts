/** A session's history as the model sees it: people's turns, the assistant's turns with their tool calls, and the tools' results. */
import type { ChatMessage, ToolCallRecord } from '../models/module.ts';
import type { SessionMessage } from '../sessions/module.ts';
import { describeAttachment } from '../channels/module.ts';
import type { AttachmentView } from '../../shared/protocol/results.ts';

/** A message's text with the files that came with it named after it. */
export function withAttachmentsNamed(message: SessionMessage): string {
  const attachments = message.data?.attachments as AttachmentView[] | undefined;
  if (!attachments?.length) return message.text;
  return [message.text, ...attachments.map(describeAttachment)].filter((line) => line.trim()).join('\n');
}

/** Turns stored messages into the conversation a model continues. In rooms, each person's turn names them. */
export function conversationOf(messages: readonly SessionMessage[], room: boolean): ChatMessage[] {
  const conversation: ChatMessage[] = [];
  let assistant: { role: 'assistant'; content: string; toolCalls?: ToolCallRecord[] } | undefined;
  const answered = new Set<string>();
  for (const message of messages) {
    if (message.kind === 'tool_result') answered.add(String(message.data?.id));
  }
  for (const message of messages) {
    // Errors are not turns; a summary is given apart (with the system text), not as a turn.
    if (message.kind === 'error' || message.kind === 'summary') continue;
    if (message.kind === 'tool_call') {
      const id = String(message.data?.id ?? '');
      // A call whose result was never recorded (the daemon stopped) is left out: providers refuse unanswered calls.
      if (!answered.has(id)) continue;
      if (!assistant) {
        assistant = { role: 'assistant', content: '' };
        conversation.push(assistant);
      }
      (assistant.toolCalls ??= []).push({ id, name: String(message.data?.name), args: message.data?.args ?? {} });
      continue;
    }
    if (message.kind === 'tool_result') {
      assistant = undefined;
      conversation.push({
        role: 'tool', toolCallId: String(message.data?.id), toolName: String(message.data?.name),
        content: message.data?.error ?? message.data?.result ?? null, isError: message.data?.error !== undefined,
      });
      continue;
    }
    if (message.role === 'user' || (message.role !== 'assistant' && message.direction === 'in')) {
      assistant = undefined;
      const text = withAttachmentsNamed(message);
      conversation.push({ role: 'user', content: room ? `${message.senderName ?? message.sender}: ${text}` : text });
    } else {
      assistant = { role: 'assistant', content: message.text };
      conversation.push(assistant);
    }
  }
  return conversation;
}
