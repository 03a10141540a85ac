import type { Key } from './api';
import { formatTime } from './components';

const ROW = 22;
const LEFT = 150;
const WIDTH = 900;
const DAY = 86_400_000;

/**
 * The signing keys on a time line (SVG: positions are attributes, not styles, so the CSP holds): each key from
 * when it was made to when it stops signing; a key with no end runs to the right edge. The dashed line is now.
 */
export function KeyTimeline({ keys, now = Date.now() }: { keys: Key[]; now?: number }) {
  const shown = keys.filter((k) => k.status !== 'expired').slice(-12);
  if (shown.length === 0) return <p class="muted">No keys yet.</p>;
  const starts = shown.map((k) => Date.parse(k.created_at));
  const from = Math.min(...starts, now - DAY);
  const ends = shown.map((k) => (k.retires_at ? Date.parse(k.retires_at) : now + 7 * DAY));
  const to = Math.max(...ends, now + DAY);
  const x = (t: number) => LEFT + ((t - from) / (to - from)) * (WIDTH - LEFT - 10);
  const height = shown.length * ROW + 30;
  return (
    // Scrolls sideways in a narrow window rather than shrinking its text out of reach.
    <div class="timeline-box" role="region" aria-label="Key timeline" tabIndex={0}>
      <svg
        class="timeline"
        viewBox={`0 0 ${WIDTH} ${height}`}
        role="img"
        aria-label={`Signing keys from ${formatTime(new Date(from).toISOString())} to ${formatTime(new Date(to).toISOString())}`}
      >
        <title>Signing key timeline</title>
        {shown.map((key, i) => {
          const y = i * ROW + 6;
          const start = x(Date.parse(key.created_at));
          const signsFrom = x(Date.parse(key.activates_at));
          const end = x(key.retires_at ? Date.parse(key.retires_at) : to);
          return (
            <g key={key.kid}>
              <text x={4} y={y + 13}>
                {key.alg} {key.kid.slice(0, 10)}…
              </text>
              <rect
                class="bar-next"
                x={start}
                y={y + 2}
                width={Math.max(2, signsFrom - start)}
                height={14}
                rx={2}
              />
              <rect
                class={`bar-${key.status}`}
                x={signsFrom}
                y={y + 2}
                width={Math.max(2, end - signsFrom)}
                height={14}
                rx={2}
              >
                <title>
                  {key.kid} ({key.status}): signs from {formatTime(key.activates_at)}
                  {key.retires_at ? ` to ${formatTime(key.retires_at)}` : ''}
                </title>
              </rect>
            </g>
          );
        })}
        <line class="axis" x1={LEFT} x2={WIDTH - 10} y1={height - 22} y2={height - 22} />
        <line class="now" x1={x(now)} x2={x(now)} y1={0} y2={height - 22} />
        <text x={LEFT} y={height - 6}>
          {formatTime(new Date(from).toISOString()).slice(0, 10)}
        </text>
        <text x={x(now) - 12} y={height - 6}>
          now
        </text>
        <text x={WIDTH - 80} y={height - 6}>
          {formatTime(new Date(to).toISOString()).slice(0, 10)}
        </text>
      </svg>
    </div>
  );
}
