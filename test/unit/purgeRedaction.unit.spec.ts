import { describe, it, expect } from 'vitest';
import { redactData } from '../../src/store/shared/purgeRedaction.js';

describe('what purge redacts, for both stores', () => {
  it('redactData nulls the request of Claimed and the response of Answered/Resolved/StaleAnswer, nothing else', () => {
    expect(redactData('Claimed', '{"request":"r","fingerprint":"f"}')).toBe('{"request":null,"fingerprint":"f"}');
    expect(redactData('Answered', '{"attempt":1,"code":"0000","response":"x","latencyMs":1}')).toBe('{"attempt":1,"code":"0000","response":null,"latencyMs":1}');
    expect(redactData('Resolved', '{"source":"inquiry","outcome":"applied","code":"0000","response":"x"}')).toBe('{"source":"inquiry","outcome":"applied","code":"0000","response":null}');
    expect(redactData('StaleAnswer', '{"attempt":1,"currentAttempt":2,"code":"0000","response":"x","responseSha256":"h","latencyMs":1}')).toBe('{"attempt":1,"currentAttempt":2,"code":"0000","response":null,"responseSha256":"h","latencyMs":1}');
    expect(redactData('Sent', '{"attempt":1,"timeoutMs":1}')).toBe('{"attempt":1,"timeoutMs":1}');
  });
});
