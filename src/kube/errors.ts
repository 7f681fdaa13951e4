// How Kubernetes API errors read: their HTTP status and a one-line message (the apiserver's own when
// it sent one). No client library import, so local mode can use it without loading the client.
/** The HTTP status of an API error from @kubernetes/client-node, if it carries one. */
export function statusCodeOf(err: unknown): number | undefined {
  const e = err as { code?: unknown; statusCode?: unknown } | null;
  const code = e?.code ?? e?.statusCode;
  return typeof code === 'number' ? code : undefined;
}

/** A one-line description of an API error: the apiserver's message when there is one. */
export function describeApiError(err: unknown): string {
  const e = err as { body?: unknown; message?: string } | null;
  let body = e?.body;
  if (typeof body === 'string') {
    try {
      body = JSON.parse(body) as unknown;
    } catch {
      // not JSON: keep the text
    }
  }
  const message = (body as { message?: unknown } | undefined)?.message;
  const code = statusCodeOf(err);
  if (typeof message === 'string') return code ? `${code}: ${message}` : message;
  return e?.message ?? String(err);
}
