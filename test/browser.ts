import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

/** Where Debian's Chromium is (`scripts/install-test-deps.sh` installs it); CHROMIUM_PATH overrides. */
const CANDIDATES = ['/usr/bin/chromium', '/usr/bin/chromium-browser', '/snap/bin/chromium'];

function chromiumPath(): string {
  const found = [process.env.CHROMIUM_PATH, ...CANDIDATES].find((p): p is string => Boolean(p) && existsSync(p!));
  if (!found)
    throw new Error(
      `No Chromium at ${CANDIDATES.join(', ')}: run scripts/install-test-deps.sh (apt's chromium), or set CHROMIUM_PATH`,
    );
  return found;
}

/**
 * A headless Chromium driven by playwright-core (no browser download: the system's). Root (CI
 * containers) cannot use Chromium's sandbox; elsewhere it stays on.
 */
export function launchChromium(extraArgs: string[] = []): Promise<Browser> {
  const args = [...(process.getuid?.() === 0 ? ['--no-sandbox'] : []), ...extraArgs];
  return chromium.launch({ executablePath: chromiumPath(), headless: true, args });
}
