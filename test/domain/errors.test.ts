import { describe, expect, it } from 'vitest';
import { descriptionText, invalidRequest, invalidScope, OAuthError } from '../../src/domain/errors.js';

/** RFC 6749 §5.2: error_description = 1*( %x20-21 / %x23-5B / %x5D-7E ). */
const DESCRIPTION = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

describe('OAuthError: an error_description of the characters RFC 6749 §5.2 allows, whatever it was given', () => {
  it('printable ASCII but " and \\ passes as it is', () => {
    const all = Array.from({ length: 0x7f - 0x20 }, (_, i) => String.fromCharCode(0x20 + i)).join('');
    const allowed = all.replace(/["\\]/g, '');
    expect(descriptionText(allowed)).toBe(allowed);
    expect(new OAuthError('invalid_request', allowed, 400).description).toBe(allowed);
  });

  it('anything else becomes ?, one for each UTF-16 unit', () => {
    expect(descriptionText('RFC 6749 §3.3')).toBe('RFC 6749 ?3.3');
    expect(descriptionText('say "no" \\ then\ttab\nline\u0000\u007f')).toBe('say ?no? ? then?tab?line??');
    expect(descriptionText('caf\u00e9 \u202egnp \u{1f511}')).toBe('caf? ?gnp ??');
  });

  it('in the description, its JSON and its message alike; the debug text (the log) stays as it is', () => {
    const error = new OAuthError('invalid_scope', 'scope "a\\b" §3.3', 400, {}, 'debug "§" stays');
    expect(error.description).toBe('scope ?a?b? ?3.3');
    expect(error.toJSON()).toEqual({ error: 'invalid_scope', error_description: 'scope ?a?b? ?3.3' });
    expect(JSON.parse(JSON.stringify(error))).toEqual(error.toJSON());
    expect(error.message).toBe('invalid_scope: scope ?a?b? ?3.3');
    expect(error.debug).toBe('debug "§" stays');
    expect(invalidRequest('naïve').description).toBe('na?ve');
    expect(invalidScope('x\u2028y').toJSON().error_description).toMatch(DESCRIPTION);
  });
});
