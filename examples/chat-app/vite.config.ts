import react from '@vitejs/plugin-react'
import { join } from 'node:path'
import { defineConfig } from 'vite'

// The page of Effect Chat: examples/chat-app/web, built to examples/chat-app/dist.
export default defineConfig({
  root: join(import.meta.dirname, 'web'),
  plugins: [react()],
  build: { outDir: join(import.meta.dirname, 'dist'), emptyOutDir: true },
})
