// The sent → delivered → read rule, the same as DeliveryStatus.of in ParleyWire: a message is
// read once every other member's read watermark reached it, delivered once every other
// member's delivered watermark did. Tests hold both to Tests/Fixtures/delivery-status.json.

/** The status of a message at `seq`, given the other members' watermarks ({deliveredSeq, readSeq}). */
export function deliveryStatus(seq, others) {
  if (others.length === 0) return "sent";
  const lowestDelivered = Math.min(...others.map((r) => r.deliveredSeq));
  const lowestRead = Math.min(...others.map((r) => r.readSeq));
  return seq <= lowestRead ? "read" : seq <= lowestDelivered ? "delivered" : "sent";
}
