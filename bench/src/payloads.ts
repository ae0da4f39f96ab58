/**
 * Tool-call payloads the benches share: realistic arguments, parsed from JSON like a model's,
 * keys in the order a schema (not the alphabet) puts them.
 */

/** An order of ~1 KB: 39 keys, nested objects and arrays, some non-ASCII text. */
export const ORDER = {
  orderId: 'ord_2Yc9kQ7wXb31',
  customer: {
    id: 'cus_8f3a91d2',
    name: 'Zoë Müller-Łukasiewicz',
    email: 'zoe.mueller@example.com',
  },
  items: [
    {
      sku: 'CAF-250-CREME',
      name: 'Café crème, whole beans, 250 g',
      quantity: 2,
      unitPrice: 12.5,
      tags: ['coffee', 'beans', 'organic'],
    },
    {
      sku: 'TEA-100-GRN',
      name: 'Sencha 緑茶 loose leaf, 100 g',
      quantity: 1,
      unitPrice: 8.99,
      tags: ['tea'],
    },
    {
      sku: 'MUG-CER-WHT',
      name: 'Mug "Classic", white, 350 ml',
      quantity: 4,
      unitPrice: 6,
      tags: [],
    },
  ],
  shipping: {
    method: 'express',
    address: {
      line1: 'Hauptstraße 12, 3. OG',
      city: 'München',
      postalCode: '80331',
      country: 'DE',
    },
    instructions: 'Leave at the door — ring twice 🙏',
  },
  payment: { method: 'card', currency: 'EUR', amountCents: 6397 },
  giftWrap: false,
  notes:
    'Customer asked twice about delivery before Friday.\nPlease prioritise; call +49 89 1234567 if the courier cannot find the entrance.',
  metadata: {
    source: 'agent',
    conversationId: 'conv_01HZX3PQ7',
    requestedAt: '2025-06-01T10:15:30.123Z',
  },
};

/** What a create-order tool returns for `ORDER`: ~1 KB, nested, some non-ASCII text. */
export const ORDER_RESULT = {
  orderId: 'ord_2Yc9kQ7wXb31',
  status: 'accepted',
  createdAt: '2025-06-01T10:15:31.042Z',
  total: { amountCents: 6397, taxCents: 1021, shippingCents: 990, currency: 'EUR' },
  lines: ORDER.items.map((item, i) => ({
    sku: item.sku,
    name: item.name,
    quantity: item.quantity,
    reserved: true,
    warehouse: `MUC-${i + 1}`,
  })),
  shipment: {
    carrier: 'DHL Express',
    trackingNumber: 'JD014600006281937465',
    estimatedDelivery: '2025-06-03',
    address: 'Hauptstraße 12, 3. OG, 80331 München, DE',
    labelUrl: 'https://labels.example.com/v2/JD014600006281937465.pdf',
  },
  receipt: {
    url: 'https://shop.example.com/receipts/ord_2Yc9kQ7wXb31',
    message: 'Danke für Ihre Bestellung, Zoë! Wir melden uns, sobald das Paket unterwegs ist.',
  },
  warnings: ['Express delivery before Friday is not guaranteed for MUG-CER-WHT (backorder).'],
};

/** Parsed from its JSON text, like the arguments of a model's tool call. */
export function parsed<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}
