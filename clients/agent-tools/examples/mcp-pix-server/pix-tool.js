// create_pix_charge: one guarded tool, served over MCP (server.js) or given
// to an OpenAI Agents SDK agent (the tests), with the same anchor and calls.

import { z } from 'zod';

import { AnchorRefused, guardTool } from 'intentd-agent-tools';

export const TOOL_NAME = 'create_pix_charge';

export const TOOL_DESCRIPTION = 'Creates a Pix charge (cobrança) for one of the customer\'s '
  + 'invoices and returns it. Safe to call again: an invoice is never charged twice, and a '
  + 'repeated call answers ALREADY DONE with the first charge.';

/** The arguments the model fills in (a zod shape: MCP inputSchema, or
 *  z.object(...) for the Agents SDK). */
export const TOOL_PARAMETERS = {
  invoice_id: z.string().describe('the invoice number, e.g. FAT-2026-000123'),
  valor: z.string().describe('the amount in reais, e.g. "180.00"'),
  chave_pix_destino: z.string().describe('the Pix key to charge: CPF, CNPJ, e-mail, phone or random key'),
  descricao: z.string().nullable().optional().describe('a short text shown to the payer'),
};

/**
 * @param {object} o
 * @param {import('intentd-client').Client} o.client
 * @param {import('./fake-psp.js').FakePsp} o.psp
 * @param {import('./invoices.js').Invoices} o.invoices
 * @param {(context: any) => string|null} o.tenantOf the caller's tenant, from
 *   server-side context only (an MCP session's auth, the run's local context)
 * @param {number} [o.leaseMs] @param {number} [o.inFlightWaitMs]
 */
export function pixChargeTool({ client, psp, invoices, tenantOf, leaseMs, inFlightWaitMs }) {
  return guardTool({
    client,
    actionType: 'pix.cobranca',
    leaseMs,
    inFlightWaitMs,
    // The anchor: the tenant from the session, the invoice from the
    // server's database. The model only names the invoice; a name the
    // tenant does not have is refused and nothing is frozen.
    anchor(args, context) {
      const tenantId = tenantOf(context);
      const invoice = tenantId ? invoices.find(tenantId, args.invoice_id) : null;
      if (!invoice) {
        throw new AnchorRefused(`there is no invoice ${JSON.stringify(args.invoice_id)} for this `
          + 'account; check the invoice number with the customer');
      }
      return {
        tenantId,
        intentRef: invoice.id,
        payload: { cliente_id: invoice.cliente_id, valor: args.valor,
          chave_pix_destino: args.chave_pix_destino, descricao: args.descricao ?? null },
      };
    },
    // input: the arguments as first frozen for this invoice (not this
    // call's, when they differ); info.txid: the Pix txid from the key.
    call(input, info) {
      return psp.createCharge({ txid: info.txid, valor: info.amountText('valor'),
        chave: input.chave_pix_destino, invoiceId: info.intentRef, descricao: input.descricao });
    },
    // recover: an earlier call died mid-call; did the PSP charge it?
    status(info) {
      return psp.findCharge(info.txid);
    },
  });
}
