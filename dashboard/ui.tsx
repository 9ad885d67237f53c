import { useState, type ReactNode } from 'react';
import { ApiError } from './api.ts';

/** The error of a failed call, split into the field it names (shown at that field) and the rest (a banner). */
export interface FormError {
  field: string | null;
  message: string;
}

export function toFormError(err: unknown): FormError {
  if (err instanceof ApiError) return { field: err.field ?? null, message: err.message };
  return { field: null, message: err instanceof Error ? err.message : String(err) };
}

/** Does the error name this field (or a part of it: `clips.look.source` belongs to `clips`)? */
function errorAt(error: FormError | undefined, field: string): string | undefined {
  if (!error?.field) return undefined;
  return error.field === field || error.field.startsWith(`${field}.`) || error.field.startsWith(`${field}[`)
    ? error.message
    : undefined;
}

/** A labelled form control with the API's error for its field under it. */
export function Field(props: {
  label: string;
  name: string;
  error?: FormError | undefined;
  hint?: string;
  children: ReactNode;
}) {
  const message = errorAt(props.error, props.name);
  return (
    <div className={message ? 'field invalid' : 'field'}>
      <label>
        <span className="label">{props.label}</span>
        {props.children}
      </label>
      {props.hint && !message && <div className="hint">{props.hint}</div>}
      {message && (
        <div className="field-error" role="alert" data-field={props.name}>
          {message}
        </div>
      )}
    </div>
  );
}

/** The error of a form that names no field of it. */
export function FormBanner(props: { error: FormError | undefined; fields: string[] }) {
  const e = props.error;
  if (!e || props.fields.some((f) => errorAt(e, f))) return null;
  return (
    <div className="banner error" role="alert">
      {e.message}
    </div>
  );
}

/** Runs an async action once at a time, with its error. */
export function useAction() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<FormError | undefined>();
  async function run(action: () => Promise<void>): Promise<void> {
    setBusy(true);
    setError(undefined);
    try {
      await action();
    } catch (err) {
      setError(toFormError(err));
    } finally {
      setBusy(false);
    }
  }
  return { busy, error, setError, run };
}

export const formatCredits = (micros: number) =>
  `${(micros / 1_000_000).toLocaleString('en', { maximumFractionDigits: 1 })} s`;

export const formatDate = (iso: string | null) =>
  iso ? new Date(iso).toLocaleString('en-GB', { timeZone: 'UTC' }) + ' UTC' : '—';
