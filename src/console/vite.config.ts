import { defineConfig } from 'vite';

/**
 * The web console's build (`npm run build` runs `vite build src/console`): one page, its script and its style
 * sheet, named after their content's hash, into dist/console, which the server reads at start. Nothing is
 * inlined into the page (the console's CSP allows no inline script or style) and nothing is fetched from
 * elsewhere at run time.
 */
export default defineConfig({
  base: '/console/',
  logLevel: 'warn',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: '../../dist/console',
    emptyOutDir: true,
    target: 'es2022',
    // The preload polyfill would be an inline script: modern browsers need none.
    modulePreload: { polyfill: false },
    // No data: URLs in place of files.
    assetsInlineLimit: 0,
    cssCodeSplit: false,
    sourcemap: false,
    reportCompressedSize: false,
  },
});
