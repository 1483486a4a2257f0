// oidc-provider ships no types; the tests use a small part of it.
declare module 'oidc-provider' {
  import type Koa from 'koa';

  export const errors: { InvalidTarget: new () => Error };

  interface Grant {
    addOIDCScope(scope: string): void;
    addResourceScope(resource: string, scope: string): void;
    save(): Promise<string>;
  }

  interface InteractionDetails {
    uid: string;
    grantId?: string;
    prompt: { name: string; details: Record<string, unknown> };
    params: Record<string, unknown>;
    session?: { accountId: string };
  }

  export default class Provider {
    constructor(issuer: string, configuration: Record<string, unknown>);
    Grant: { new (init: { accountId: string; clientId: string }): Grant; find(id: string): Promise<Grant | undefined> };
    use(middleware: Koa.Middleware): void;
    on(event: string, listener: (...args: any[]) => void): void;
    callback(): (req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse) => void;
    interactionDetails(req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse): Promise<InteractionDetails>;
    interactionFinished(req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse, result: Record<string, unknown>, options?: { mergeWithLastSubmission?: boolean }): Promise<void>;
  }
}
