import { once } from 'node:events';
import type { Writable } from 'node:stream';

/**
 * Text to a stream in pieces of about 64 KiB, waiting for 'drain' when the stream asks: a run with a million
 * breaks neither writes a million times nor buffers them all.
 */
export class TextOut {
  private buffered = '';
  constructor(private readonly out: Writable) {}

  async push(text: string): Promise<void> {
    this.buffered += text;
    if (this.buffered.length >= 65_536) await this.flush();
  }

  async flush(): Promise<void> {
    if (this.buffered === '') return;
    const text = this.buffered;
    this.buffered = '';
    if (!this.out.write(text)) await once(this.out, 'drain');
  }
}
