import { Option, type Command } from 'commander';
import { OPERATOR_ROLES } from '../domain/validate.js';
import { operators, views } from '../management/index.js';
import type { Enrollment } from '../management/operators.js';
import { action, withJson } from './common.js';
import { formatTable, print, printJson } from './output.js';

const linkText = (enrollment: Enrollment, what: string): string =>
  `${what}\n` +
  `Enrollment link (valid until ${enrollment.expiresAt}, works once; the operator sets a password there):\n` +
  `  ${enrollment.url}\n`;

/** `tessera operator add|list|disable|enable|set-role|reset|remove`: the console's people. */
export function operatorCommands(program: Command): void {
  const operator = program
    .command('operator')
    .alias('operators')
    .description('people who manage Tessera in the web console (/console)');
  withJson(
    operator
      .command('add <email>')
      .description('add an operator; prints a one-time enrollment link (valid 24 h)')
      .addOption(
        new Option('--role <role>', 'admin: everything; viewer: sees everything, changes nothing')
          .choices(OPERATOR_ROLES)
          .default('viewer'),
      ),
  ).action(
    action(async (ctx, json, email: string, options: { role: string }) => {
      const added = await operators.addOperator(ctx, { email, role: options.role });
      if (json) printJson(views.enrollmentJson(added));
      else print(linkText(added, `Operator ${added.operator.email} added (${added.operator.role}).`));
    }),
  );
  withJson(operator.command('list').description('list operators')).action(
    action(async (ctx, json) => {
      const list = await operators.listOperators(ctx);
      if (json) printJson(list.map(views.operatorJson));
      else
        print(
          formatTable(
            ['email', 'role', 'enabled', 'enrolled', 'last_login_at', 'created_at'],
            list.map((o) => [
              o.email,
              o.role,
              o.enabled ? 'yes' : 'no',
              o.enrolled ? 'yes' : o.enrollmentExpiresAt ? `link until ${o.enrollmentExpiresAt}` : 'no',
              o.lastLoginAt,
              o.createdAt,
            ]),
          ),
        );
    }),
  );
  for (const [name, enabled, text] of [
    ['disable', false, 'disable an operator: their sessions end at once, on every instance'],
    ['enable', true, 'enable an operator again'],
  ] as const) {
    withJson(operator.command(`${name} <email>`).description(text)).action(
      action(async (ctx, json, email: string) => {
        const updated = await operators.updateOperator(ctx, email, { enabled });
        if (json) printJson(views.operatorJson(updated));
        else print(`Operator ${updated.email} ${enabled ? 'enabled' : 'disabled'}.\n`);
      }),
    );
  }
  withJson(
    operator
      .command('set-role <email> <role>')
      .description(`change an operator's role (${OPERATOR_ROLES.join(' or ')})`),
  ).action(
    action(async (ctx, json, email: string, role: string) => {
      const updated = await operators.updateOperator(ctx, email, { role });
      if (json) printJson(views.operatorJson(updated));
      else print(`Operator ${updated.email} is ${updated.role} now.\n`);
    }),
  );
  withJson(
    operator
      .command('reset <email>')
      .description('a new enrollment link; the password is cleared and the operator is signed out'),
  ).action(
    action(async (ctx, json, email: string) => {
      const reset = await operators.resetOperator(ctx, email);
      if (json) printJson(views.enrollmentJson(reset));
      else print(linkText(reset, `Operator ${reset.operator.email}: password cleared, sessions ended.`));
    }),
  );
  withJson(operator.command('remove <email>').description('remove an operator; their sessions end')).action(
    action(async (ctx, json, email: string) => {
      const removed = await operators.removeOperator(ctx, email);
      if (json) printJson({ email: removed.email, removed: true });
      else print(`Operator ${removed.email} removed.\n`);
    }),
  );
}
