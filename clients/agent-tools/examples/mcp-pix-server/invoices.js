// The server's own database of invoices, per tenant: what the anchor
// function checks the model's invoice number against. An invoice the
// tenant does not have is refused before anything is frozen.

import fs from 'node:fs';

const SAMPLE = {
  acme: {
    'FAT-2026-000123': { cliente_id: '01J9ZQ3K8V7M2N4P6R8T0W2Y4A', valor: '180.00' },
    'FAT-2026-000124': { cliente_id: '01J9ZQ3K8V7M2N4P6R8T0W2Y4B', valor: '72.50' },
  },
};

export class Invoices {
  /** @param {Record<string, Record<string, object>>} byTenant tenant → invoice id → invoice */
  constructor(byTenant) { this.byTenant = byTenant; }

  /** The invoice { id, cliente_id, valor, … } of that tenant, or null. */
  find(tenantId, invoiceId) {
    const invoices = Object.hasOwn(this.byTenant, tenantId) ? this.byTenant[tenantId] : null;
    if (!invoices || typeof invoiceId !== 'string' || !Object.hasOwn(invoices, invoiceId)) {
      return null;
    }
    return { id: invoiceId, ...invoices[invoiceId] };
  }
}

/** The invoices of a JSON file shaped like SAMPLE, or the sample ones. */
export function loadInvoices(file) {
  return new Invoices(file ? JSON.parse(fs.readFileSync(file, 'utf8')) : SAMPLE);
}
