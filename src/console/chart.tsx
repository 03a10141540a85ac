import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';

/** Issued and refused token requests per minute, drawn with uPlot (canvas; its styles are set through the CSSOM). */
export function TokenChart({
  minutes,
  label,
}: {
  minutes: { minute: string; issued: number; refused: number }[];
  label: string;
}) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | undefined>(undefined);

  const data = (): uPlot.AlignedData => [
    minutes.map((m) => Date.parse(m.minute) / 1000),
    minutes.map((m) => m.issued),
    minutes.map((m) => m.refused),
  ];

  useEffect(() => {
    const element = box.current;
    if (!element) return;
    const colors = getComputedStyle(element);
    const issued = colors.getPropertyValue('--issued').trim() || '#2457a6';
    const refused = colors.getPropertyValue('--refused').trim() || '#c2410c';
    const width = () => Math.max(280, element.clientWidth);
    const chart = new uPlot(
      {
        width: width(),
        height: 260,
        legend: { show: false },
        cursor: { drag: { x: false, y: false } },
        scales: {
          x: { time: true },
          y: { range: (_u, _min, max) => [0, Math.max(5, Math.ceil(max * 1.1))] },
        },
        // 24-hour UTC times on the x axis (uPlot's default is the browser's 12-hour clock).
        axes: [
          { values: (_u, splits) => splits.map((s) => new Date(s * 1000).toISOString().slice(11, 16)) },
          { label: 'per minute', size: 60 },
        ],
        series: [
          { label: 'time (UTC)' },
          { label: 'issued', stroke: issued, width: 2, fill: `${issued}22`, points: { show: false } },
          { label: 'refused', stroke: refused, width: 2, points: { show: false } },
        ],
      },
      data(),
      element,
    );
    plot.current = chart;
    const resize = new ResizeObserver(() => chart.setSize({ width: width(), height: 260 }));
    resize.observe(element);
    return () => {
      resize.disconnect();
      chart.destroy();
      plot.current = undefined;
    };
  }, []);

  useEffect(() => {
    plot.current?.setData(data());
  }, [minutes]);

  return <div ref={box} class="chart" role="img" aria-label={label} />;
}
