import { useEffect, useState } from 'react';
import type { MouseEvent, ReactNode } from 'react';

/*
 * A few lines of routing: paths under BASE (the Vite `base`), pushState, and links that stay
 * real <a href> elements so the keyboard, middle-click and "open in new tab" work.
 */

export const BASE = '/dashboard/';

export interface Location {
  /** The path under BASE, without a leading slash: `runs/run_abc`. */
  path: string;
  search: URLSearchParams;
}

function current(): Location {
  const path = window.location.pathname.startsWith(BASE) ? window.location.pathname.slice(BASE.length) : '';
  return { path: decodeURIComponent(path.replace(/\/+$/, '')), search: new URLSearchParams(window.location.search) };
}

const listeners = new Set<() => void>();
window.addEventListener('popstate', () => listeners.forEach((listener) => listener()));

export function navigate(to: string, options: { replace?: boolean } = {}): void {
  const url = `${BASE}${to.replace(/^\//, '')}`;
  if (options.replace === true) window.history.replaceState(null, '', url);
  else window.history.pushState(null, '', url);
  listeners.forEach((listener) => listener());
}

export function useLocation(): Location {
  const [location, setLocation] = useState(current);
  useEffect(() => {
    const update = () => setLocation(current());
    listeners.add(update);
    return () => void listeners.delete(update);
  }, []);
  return location;
}

export function href(to: string): string {
  return `${BASE}${to.replace(/^\//, '')}`;
}

export function Link(props: { to: string; children: ReactNode; className?: string; 'aria-current'?: 'page' | undefined; tabIndex?: number }) {
  const onClick = (event: MouseEvent<HTMLAnchorElement>) => {
    if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    event.preventDefault();
    navigate(props.to);
  };
  return (
    <a href={href(props.to)} onClick={onClick} className={props.className} aria-current={props['aria-current']} tabIndex={props.tabIndex}>
      {props.children}
    </a>
  );
}
