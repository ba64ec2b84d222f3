// SPDX-License-Identifier: GPL-2.0
/*
 * node speedscope_tracks.js NPM_DIR CHROMIUM FILE SCREENSHOT TRACK..
 *
 * Opens speedscope's own static app (the npm package in NPM_DIR) in
 * headless Chromium through playwright-core, imports FILE as a user
 * does (the file input behind "Browse"), opens the profile selector and
 * checks that each TRACK ("NAME (tid N)") is one of the profiles it
 * lists, under a process. Then shows the first TRACK's profile and saves
 * a screenshot. One TAP line per check on stdout; exit status 1 when one
 * failed.
 */
'use strict';

const fs = require('fs');
const path = require('path');

const [npmDir, chromiumPath, file, shot, ...tracks] = process.argv.slice(2);
const { chromium } = require(path.join(npmDir, 'node_modules', 'playwright-core'));
const app = path.join(npmDir, 'node_modules', 'speedscope', 'dist',
		      'release', 'index.html');

let n = 0, failed = 0;

function check(ok, what, why) {
	n++;
	if (!ok)
		failed++;
	console.log(`${ok ? 'ok' : 'not ok'} ${n} ${what}${ok || !why ? '' : ' # ' + why}`);
}

async function main() {
	const browser = await chromium.launch({
		executablePath: chromiumPath,
		headless: true,
		args: ['--no-sandbox'],
	});
	try {
		const page = await browser.newPage({
			viewport: { width: 1280, height: 600 },
		});
		const log = [];

		page.on('console', (m) => log.push(m.text()));
		page.on('pageerror', (e) => log.push('page error: ' + e));
		await page.goto('file://' + app);
		await page.setInputFiles('input[type=file]', file);
		/* the selector's title: "PROCESS (pid N), THREAD (tid N) (1/N)" */
		const title = page.getByText(/^\(1\/\d+\)$/);
		let count = 0;

		try {
			await title.waitFor({ timeout: 30000 });
			count = parseInt((await title.innerText()).slice(3), 10);
		} catch (e) {
			console.log('# ' + log.join('\n# '));
		}
		check(log.includes('Importing as Trace Event Format profile'),
		      'speedscope imports the file as Trace Event Format',
		      log.slice(-3).join(' | '));
		check(count >= tracks.length,
		      `speedscope shows ${count} profiles, at least ${tracks.length}`);
		if (!count)
			return;
		await title.click();
		const rows = await page.locator('text=/\\(pid \\d+\\), .* \\(tid \\d+\\)$/').allInnerTexts();

		console.log('# profiles listed: ' + rows.join('; '));
		for (const t of tracks)
			check(rows.some((r) => r.endsWith(', ' + t)),
			      `the profile selector lists the track ${t}`);
		/* show the first track: the title then names it */
		const row = rows.find((r) => r.endsWith(', ' + tracks[0]));
		let shown = false;

		if (row) {
			await page.getByText(row, { exact: true }).last().click();
			shown = await page.getByText(row + ' (', { exact: false })
				.first().waitFor({ timeout: 10000 })
				.then(() => true, () => false);
		}
		check(shown, `speedscope shows the flame chart of ${tracks[0]}`);
		await page.waitForTimeout(1000);
		await page.screenshot({ path: shot });
		check(fs.statSync(shot, { throwIfNoEntry: false })?.size > 0,
		      `screenshot in ${shot}`);
	} finally {
		await browser.close();
	}
}

main().then(() => {
	process.exit(failed ? 1 : 0);
}, (e) => {
	check(false, 'the browser session ran', String(e).split('\n')[0]);
	process.exit(1);
});
